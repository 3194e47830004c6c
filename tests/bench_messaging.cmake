# nemo-bench's messaging mechanisms (bench/mechs/messaging.c) hand over
# every wake-up in a short run, in every scenario they have: places
# joining, sending, waiting, interrupt mode and leaving, end to end.
# Included from tests/CMakeLists.txt, which defines BENCH.
foreach(mech nemo-am nemo-notify)
  add_test(NAME smoke.unicast.${mech} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/smoke.sh ${BENCH} unicast ${mech})
  set_tests_properties(smoke.unicast.${mech} PROPERTIES LABELS "smoke;concurrency" TIMEOUT 120)
endforeach()
add_test(NAME smoke.broadcast.nemo-am COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/smoke.sh ${BENCH} broadcast nemo-am --scenarios blocked --waiters 1,4)
set_tests_properties(smoke.broadcast.nemo-am PROPERTIES LABELS "smoke;concurrency" TIMEOUT 120)
