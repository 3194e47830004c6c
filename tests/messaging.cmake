# The messaging and active-message layers' unit tests (test_messaging.c):
# every error of the API, each delivery context, order, visibility,
# backpressure, leaving with messages queued, and sends racing a leave.
nemo_c_test(test_messaging SOURCES test_messaging.c LABELS "unit;concurrency")

# The same with the per-send fence instead of the leaver's membarrier
# (src/platform/asym.c): the fallback path stays tested.
add_test(NAME test_messaging_fenced COMMAND test_messaging)
set_tests_properties(test_messaging_fenced PROPERTIES LABELS "unit;concurrency"
  ENVIRONMENT NEMO_MEMBARRIER=0 TIMEOUT 120)
# The limit is for a hang, not for speed: under ThreadSanitizer the run took
# 39 s alone on the 2-vCPU VM and 140 s beside two CPU-bound processes,
# past 120 s (its hand-offs spin and yield, and each yield gives a hog
# its time slice).
if(NOT NEMO_SANITIZE STREQUAL "")
  set_tests_properties(test_messaging test_messaging_fenced PROPERTIES TIMEOUT 600)
endif()

# Request/reply that cannot lose a reply: the worker pool (10^6 tasks,
# more workers than CPUs, replies from handlers, no flow control), a plain
# thread's requests, overflow order, bound and drops (overflow.c,
# OVERFLOW).
nemo_c_test(test_reply SOURCES test_reply.c LABELS "unit;concurrency")
set_tests_properties(test_reply PROPERTIES TIMEOUT 600)

# A place in an epoll loop on nemo_place_fd(): a flood from a place, a
# plain thread and batches, level- and edge-triggered, misses nothing.
nemo_c_test(test_fd SOURCES test_fd.c LABELS "unit;concurrency")

# Threshold checks (nemo/poll.h): messages handled by NEMO_POLL_CHECK() in
# a compute loop; not-due checks do not poll; the not-due cost counted by
# callgrind (<= 10 instructions per check, loop included); and "func-t":
# code built with -finstrument-functions and libnemo-instrument.
nemo_c_test(test_pollcheck SOURCES test_pollcheck.c LABELS "unit;concurrency")
add_executable(pollcheck_cost pollcheck_cost.c)
target_compile_options(pollcheck_cost PRIVATE ${NEMO_WARNINGS})
target_link_libraries(pollcheck_cost PRIVATE nemo_static)
if(NOT NEMO_SANITIZE)
  add_test(NAME pollcheck.cost COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_pollcheck_cost.sh $<TARGET_FILE:pollcheck_cost>)
  set_tests_properties(pollcheck.cost PROPERTIES LABELS unit TIMEOUT 120)
endif()
add_executable(functrace functrace.c)
target_compile_options(functrace PRIVATE ${NEMO_WARNINGS} -finstrument-functions)
target_link_libraries(functrace PRIVATE nemo-instrument nemo_shared Threads::Threads)
add_test(NAME pollcheck.functrace COMMAND functrace)
set_tests_properties(pollcheck.functrace PROPERTIES LABELS "unit;concurrency" TIMEOUT 120)

# The progress thread (nemo/poll.h): a computing place served by it.
nemo_c_test(test_progress SOURCES test_progress.c LABELS "unit;concurrency")

# The polling watchdog (nemo/poll.h).  Not under ThreadSanitizer: its
# signals' handlers run only at the watched thread's next intercepted
# call, and the watched thread computes with none (as example.interrupts).
nemo_c_test(test_watchdog SOURCES test_watchdog.c LABELS unit)

# Notification delays (NEMO_DOMAIN_DELAYS).
nemo_c_test(test_delays SOURCES test_delays.c LABELS "unit;concurrency")

# Bound sends (nemo/am.h) and the generic send's curry: behaviour, and
# their instruction counts (callgrind: send.cost, bound.cost).
nemo_c_test(test_bound SOURCES test_bound.c LABELS "unit;concurrency")
# Stream grants (grant.c, THE STREAM GRANT): granted, revoked before a
# sleep or an eventfd, nothing lost; once more without membarrier.
nemo_c_test(test_grant SOURCES test_grant.c LABELS "unit;concurrency")
add_test(NAME test_grant.nomembarrier COMMAND test_grant)
set_tests_properties(test_grant.nomembarrier PROPERTIES ENVIRONMENT NEMO_MEMBARRIER=0 LABELS "unit;concurrency" TIMEOUT 120)
add_executable(bound_cost bound_cost.c)
target_compile_options(bound_cost PRIVATE ${NEMO_WARNINGS})
target_link_libraries(bound_cost PRIVATE nemo_static Threads::Threads)
add_executable(send_cost send_cost.c)
target_compile_options(send_cost PRIVATE ${NEMO_WARNINGS})
target_link_libraries(send_cost PRIVATE nemo_static)
if(NOT NEMO_SANITIZE)
  add_test(NAME bound.cost COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_bound_cost.sh $<TARGET_FILE:bound_cost>)
  set_tests_properties(bound.cost PROPERTIES LABELS unit TIMEOUT 300)
  # nemo_am_send <= 130 and nemo_am_send_bound <= 70 instructions a send.
  add_test(NAME send.cost COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_send_cost.sh $<TARGET_FILE:send_cost>)
  set_tests_properties(send.cost PROPERTIES LABELS unit TIMEOUT 300)
endif()
# Private fast calls set up by a control string (nemo_ctl, nemo_fast).
nemo_c_test(test_ctl SOURCES test_ctl.c LABELS unit)

# Curried writes through io_uring (nemo/fastio.h, libnemo-fastio).
add_executable(test_fastio test_fastio.c)
target_compile_options(test_fastio PRIVATE ${NEMO_WARNINGS})
target_include_directories(test_fastio PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(test_fastio PRIVATE nemo-fastio nemo_shared Threads::Threads m)
add_test(NAME test_fastio COMMAND test_fastio)
set_tests_properties(test_fastio PROPERTIES LABELS "unit;concurrency" TIMEOUT 120)
