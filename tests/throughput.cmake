# The throughput suite (bench/suites/throughput.c): one short run of every
# mechanism.  nemo-bench checks the hand-off itself (every message in
# order, the receiver's sum exactly n(n+1)/2) and fails the run otherwise;
# the JSON goes through the schema in tests/python.  No rate is asserted.
set(NEMO_TP_MECHS "")
if(NEMO_SANITIZE STREQUAL "thread")
  # ck_ring orders its slots by x86's store order and compiler barriers,
  # which ThreadSanitizer cannot see: it would report every slot as a race.
  # Under TSan only nemo's own queue runs; the other builds run both.
  set(NEMO_TP_MECHS --mechanisms nemo-am)
endif()
add_test(NAME smoke.throughput
  COMMAND ${BENCH} throughput --seconds 0.3 --quiet ${NEMO_TP_MECHS}
          --json ${CMAKE_CURRENT_BINARY_DIR}/smoke-throughput.json)
set_tests_properties(smoke.throughput PROPERTIES LABELS "smoke;concurrency" TIMEOUT 120)
