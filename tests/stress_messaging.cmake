# The flood stress test of the messaging and active-message layers
# (stress_messaging.c): all-to-all floods over small rings, every flag,
# wait policy and interrupt mode, places leaving and re-joining,
# oversubscribed; tens of millions of messages in the plain build, 5%
# under the sanitizers (they are 10-20x slower).
nemo_c_test(stress_messaging SOURCES stress_messaging.c LABELS "stress;concurrency")
if(NEMO_SANITIZE STREQUAL "")
  set_tests_properties(stress_messaging PROPERTIES TIMEOUT 600)
else()
  set_tests_properties(stress_messaging PROPERTIES TIMEOUT 900 ENVIRONMENT NEMO_STRESS_SCALE=0.05)
endif()
