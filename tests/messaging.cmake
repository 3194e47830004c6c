# The messaging and active-message layers' unit tests (test_messaging.c):
# every error of the API, each delivery context, order, visibility,
# backpressure, leaving with messages queued, and sends racing a leave.
nemo_c_test(test_messaging SOURCES test_messaging.c LABELS "unit;concurrency")
