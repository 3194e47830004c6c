# The flood stress test of the messaging and active-message layers
# (stress_messaging.c): all-to-all floods over small rings, every flag,
# wait policy and interrupt mode, places leaving and re-joining,
# oversubscribed; tens of millions of messages in the plain build, 5%
# under the sanitizers (they are 10-20x slower).
nemo_c_test(stress_messaging SOURCES stress_messaging.c LABELS "stress;concurrency")
# The limit is for a hang, not for speed: beside two CPU-bound processes
# the plain run took 353-480 s (25-50 s alone), and its own no-progress
# check already tells starvation from a stall.
if(NEMO_SANITIZE STREQUAL "")
  set_tests_properties(stress_messaging PROPERTIES TIMEOUT 1200)
else()
  set_tests_properties(stress_messaging PROPERTIES TIMEOUT 900 ENVIRONMENT NEMO_STRESS_SCALE=0.05)
endif()
