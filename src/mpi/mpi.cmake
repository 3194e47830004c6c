# The MPI layer (nemo/mpi.h, docs/mpi.md): built only when CMake finds an
# MPI (MPICH: scripts/bootstrap installs mpich libmpich-dev).  Its tests
# run under mpiexec in the plain build; under ASan and TSan only
# finalize-race (a binding's lifetime against other threads' sends), with
# LeakSanitizer off (MPICH's own allocations are reported) and UCX's
# memory hooks off (UCX_MEM_EVENTS=no: under TSan, UCX's madvise hook
# crashes a thread that exits; see docs/mpi.md).
find_package(MPI COMPONENTS C QUIET)
if(NOT MPI_C_FOUND)
  message(STATUS "nemo: no MPI found; nemo-mpi, its tests and nemo-bench-mpi are not built")
  return()
endif()
message(STATUS "nemo: MPI found (${MPI_C_LIBRARY_VERSION_STRING}); building nemo-mpi")

add_library(nemo-mpi SHARED ${PROJECT_SOURCE_DIR}/src/mpi/mpi.c ${PROJECT_SOURCE_DIR}/src/mpi/peers.c
            ${PROJECT_SOURCE_DIR}/src/mpi/record.c ${PROJECT_SOURCE_DIR}/src/mpi/progress.c ${PROJECT_SOURCE_DIR}/src/mpi/send.c)
set_target_properties(nemo-mpi PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
target_compile_options(nemo-mpi PRIVATE ${NEMO_WARNINGS})
target_include_directories(nemo-mpi PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(nemo-mpi PUBLIC nemo_shared MPI::MPI_C)
add_library(nemo::mpi ALIAS nemo-mpi)
# Installed: DT_RUNPATH $ORIGIN (it finds libnemo.so beside it), and
# exported as nemo::mpi in its own file of the CMake package, which
# nemoConfig.cmake loads when the consumer finds MPI (component mpi).
set_target_properties(nemo-mpi PROPERTIES EXPORT_NAME mpi INSTALL_RPATH "$ORIGIN")
install(TARGETS nemo-mpi EXPORT nemoMpiTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT nemoMpiTargets NAMESPACE nemo:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/nemo)

find_program(NEMO_MPIEXEC NAMES mpiexec.hydra mpiexec HINTS ${MPI_C_COMPILER_DIR})
if(NOT NEMO_MPIEXEC)
  set(NEMO_MPIEXEC ${MPIEXEC_EXECUTABLE})
endif()

if(NEMO_BUILD_TESTS)
  add_executable(test_mpi ${PROJECT_SOURCE_DIR}/tests/test_mpi.c)
  target_compile_options(test_mpi PRIVATE ${NEMO_WARNINGS})
  target_include_directories(test_mpi PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(test_mpi PRIVATE nemo-mpi)
  if(NEMO_SANITIZE STREQUAL "")
    # Root may run mpiexec here (the bootstrap's machines); MPICH's hydra
    # needs no flag for that.  Each test is one mpiexec.
    foreach(n 2 4)
      foreach(mode order-send order-check order-thread order-watchdog order-funneled
                   shutdown-send shutdown-thread errors)
        add_test(NAME mpi.${mode}.n${n}
                 COMMAND ${NEMO_MPIEXEC} -n ${n} $<TARGET_FILE:test_mpi> ${mode})
        set_tests_properties(mpi.${mode}.n${n} PROPERTIES LABELS mpi TIMEOUT 120 RUN_SERIAL ON)
      endforeach()
      # A rank that dies (abort; deadreuse: its pid then taken by another
      # process) or never finalizes (finalize-stuck): errors, not hangs.
      foreach(mode abort deadreuse finalize-stuck)
        add_test(NAME mpi.${mode}.n${n}
                 COMMAND ${PROJECT_SOURCE_DIR}/tests/test_mpi_abort.sh ${NEMO_MPIEXEC} ${n} $<TARGET_FILE:test_mpi> ${mode})
        set_tests_properties(mpi.${mode}.n${n} PROPERTIES LABELS mpi TIMEOUT 120 RUN_SERIAL ON)
      endforeach()
      add_test(NAME mpi.finalize-race.n${n} COMMAND ${NEMO_MPIEXEC} -n ${n} $<TARGET_FILE:test_mpi> finalize-race)
      set_tests_properties(mpi.finalize-race.n${n} PROPERTIES LABELS mpi TIMEOUT 120 RUN_SERIAL ON)
    endforeach()
    # One progress thread per domain: the binding's and nemo_progress_start's.
    foreach(v before after before-watchdog after-watchdog)
      add_test(NAME mpi.shared-${v}.n2 COMMAND ${NEMO_MPIEXEC} -n 2 $<TARGET_FILE:test_mpi> shared-${v})
      set_tests_properties(mpi.shared-${v}.n2 PROPERTIES LABELS mpi TIMEOUT 120 RUN_SERIAL ON)
    endforeach()
    # The ordinary calls drive MPI (issue 31): every strategy.
    foreach(n 2 4)
      foreach(s send check thread watchdog)
        add_test(NAME mpi.ordinary-${s}.n${n}
                 COMMAND ${NEMO_MPIEXEC} -n ${n} $<TARGET_FILE:test_mpi> ordinary-${s})
        set_tests_properties(mpi.ordinary-${s}.n${n} PROPERTIES LABELS mpi TIMEOUT 120 RUN_SERIAL ON)
      endforeach()
    endforeach()
    # A dead rank reported as a dead process is (issue 31): three ranks,
    # the last dies; the survivors' sends, their waits for its replies,
    # nemo_dead_places.
    add_test(NAME mpi.death.n3
             COMMAND ${PROJECT_SOURCE_DIR}/tests/test_mpi_abort.sh ${NEMO_MPIEXEC} 3 $<TARGET_FILE:test_mpi> death)
    set_tests_properties(mpi.death.n3 PROPERTIES LABELS mpi TIMEOUT 120 RUN_SERIAL ON)
    # The same promise for a place that only polls, for one in an epoll
    # loop, and under the progress thread.
    foreach(v send-poll send-sendfirst thread thread-poll thread-fd thread-late)
      add_test(NAME mpi.death-${v}.n3
               COMMAND ${PROJECT_SOURCE_DIR}/tests/test_mpi_abort.sh ${NEMO_MPIEXEC} 3 $<TARGET_FILE:test_mpi> death-${v})
      set_tests_properties(mpi.death-${v}.n3 PROPERTIES LABELS mpi TIMEOUT 120 RUN_SERIAL ON)
    endforeach()
    # Flow control against a rank that takes nothing: two ranks suffice.
    add_test(NAME mpi.flow.n2 COMMAND ${NEMO_MPIEXEC} -n 2 $<TARGET_FILE:test_mpi> flow)
    set_tests_properties(mpi.flow.n2 PROPERTIES LABELS mpi TIMEOUT 120 RUN_SERIAL ON)
  else()
    # The binding's lifetime under the sanitizers: a freed binding used by
    # a sending thread is a heap-use-after-free (ASan) or a race (TSan).
    add_test(NAME mpi.finalize-race.n2 COMMAND ${NEMO_MPIEXEC} -n 2 $<TARGET_FILE:test_mpi> finalize-race)
    set_tests_properties(mpi.finalize-race.n2 PROPERTIES LABELS "mpi;concurrency" TIMEOUT 300 RUN_SERIAL ON
      ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;UCX_MEM_EVENTS=no;TSAN_OPTIONS=halt_on_error=1 second_deadlock_stack=1")
  endif()
endif()

if(NEMO_BUILD_BENCH)
  add_executable(nemo-bench-mpi ${PROJECT_SOURCE_DIR}/bench/mpi/nemo_bench_mpi.c ${PROJECT_SOURCE_DIR}/bench/core/stats.c)
  target_compile_options(nemo-bench-mpi PRIVATE ${NEMO_WARNINGS})
  target_link_libraries(nemo-bench-mpi PRIVATE nemo-mpi m)
  set_target_properties(nemo-bench-mpi PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin
    INSTALL_RPATH "${NEMO_BIN_RUNPATH}")
  install(TARGETS nemo-bench-mpi RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  if(NEMO_BUILD_TESTS AND NEMO_SANITIZE STREQUAL "")
    add_test(NAME mpi.bench.smoke
             COMMAND ${NEMO_MPIEXEC} -n 2 $<TARGET_FILE:nemo-bench-mpi> --quick)
    set_tests_properties(mpi.bench.smoke PROPERTIES LABELS mpi TIMEOUT 120 RUN_SERIAL ON)
  endif()
endif()

configure_file(${PROJECT_SOURCE_DIR}/src/mpi/nemo-mpi.pc.in ${PROJECT_BINARY_DIR}/nemo-mpi.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/nemo-mpi.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

add_executable(mpi_ring ${PROJECT_SOURCE_DIR}/examples/mpi_ring.c)
target_compile_options(mpi_ring PRIVATE ${NEMO_WARNINGS})
target_link_libraries(mpi_ring PRIVATE nemo-mpi)
set_target_properties(mpi_ring PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/examples)
if(NEMO_BUILD_TESTS AND NEMO_SANITIZE STREQUAL "")
  foreach(s send check thread watchdog)
    add_test(NAME mpi.example.ring.${s} COMMAND ${NEMO_MPIEXEC} -n 4 $<TARGET_FILE:mpi_ring> 200 ${s})
    set_tests_properties(mpi.example.ring.${s} PROPERTIES LABELS mpi TIMEOUT 120 RUN_SERIAL ON
                         PASS_REGULAR_EXPRESSION "mpi_ring: 200 laps around 4 ranks")
  endforeach()
endif()
