# tessera-bench-sharing-replay: a sharing scenario replayed through the scheduler core beside
# `sim sharing`'s tessera strategy (docs/SHARING.md, "Replay through the scheduler"). Its tests
# check every bind's assignment and that both paths place every workload identically. Included
# by bench/CMakeLists.txt, and by the top level in sanitized test builds (which build no other
# benchmark), so the tests run under ASan/UBSan too.
add_executable(tessera-bench-sharing-replay ${CMAKE_SOURCE_DIR}/bench/sharing_replay_bench.cc)
target_include_directories(tessera-bench-sharing-replay PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(tessera-bench-sharing-replay PRIVATE tessera_kube tessera_sim CLI11::CLI11
                      nlohmann_json::nlohmann_json)
if(TESSERA_BUILD_TESTS)
  add_test(NAME sharing_replay_small
           COMMAND tessera-bench-sharing-replay --require-same-placements
                   --require-identical-placements --scenario
                   ${CMAKE_SOURCE_DIR}/bench/scenarios/sharing-small.json)
  set_tests_properties(sharing_replay_small PROPERTIES LABELS unit TIMEOUT 120)
  # Inference above the rest: fractional pods preempt, in both paths alike.
  add_test(NAME sharing_replay_small-priority
           COMMAND tessera-bench-sharing-replay --require-same-placements
                   --require-identical-placements --scenario
                   ${CMAKE_SOURCE_DIR}/bench/scenarios/sharing-small-priority.json)
  set_tests_properties(sharing_replay_small-priority PROPERTIES LABELS unit TIMEOUT 120)
  # A day of the mixed scenario (with multi-GPU training), of the same with training at a higher
  # priority (preemption), and of every class but training: the scheduler places every workload
  # as `sim sharing` does, at the same time, on the same GPUs, as the same kind of slice.
  foreach(scenario mixed mixed-priority no-training)
    add_test(NAME sharing_replay_${scenario}
             COMMAND tessera-bench-sharing-replay --require-same-placements
                     --require-identical-placements --scenario
                     ${CMAKE_SOURCE_DIR}/bench/scenarios/sharing-${scenario}.json)
    set_tests_properties(sharing_replay_${scenario} PROPERTIES LABELS unit TIMEOUT 900)
  endforeach()
  # Another day of the mixed scenario, in which a gang's placement ends its reservation while
  # another gang waits for that node: both paths give it the node at once.
  add_test(NAME sharing_replay_mixed-seed99
           COMMAND tessera-bench-sharing-replay --require-same-placements
                   --require-identical-placements --seed 99 --scenario
                   ${CMAKE_SOURCE_DIR}/bench/scenarios/sharing-mixed.json)
  set_tests_properties(sharing_replay_mixed-seed99 PROPERTIES LABELS unit TIMEOUT 900)
  # Random scenarios (tests/scripts/sharing_replay_random.py): node groups of MIG and plain
  # GPUs, fractions and gangs, isolation mixes, model lists, priorities and node protection
  # (which the bench turns off: the scheduler has none). The listed seeds are scenarios in which
  # the two paths once disagreed: a victim's recreated pod was observed by the scheduler's MIG
  # planner only; equal victims were told apart by id; the simulation planned a layout before
  # it had observed the other arrivals of the same second.
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  add_test(NAME sharing_replay_random
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/scripts/sharing_replay_random.py
                   --bench $<TARGET_FILE:tessera-bench-sharing-replay> --seed 1 --count 40)
  add_test(NAME sharing_replay_random-regressions
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/scripts/sharing_replay_random.py
                   --bench $<TARGET_FILE:tessera-bench-sharing-replay>
                   --seeds 122,437,643,901,1420,4722)
  # Random scenarios with a new scheduler core every 10 minutes of simulated time, or every
  # 97 s: it adopts every bound pod and never gives anything twice.
  add_test(NAME sharing_replay_random-restarts
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/scripts/sharing_replay_random.py
                   --bench $<TARGET_FILE:tessera-bench-sharing-replay> --seed 1 --count 20
                   --restart-every 600)
  add_test(NAME sharing_replay_random-restarts-often
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/scripts/sharing_replay_random.py
                   --bench $<TARGET_FILE:tessera-bench-sharing-replay> --seed 21 --count 20
                   --restart-every 97)
  # The same, with every new core told that MIG is off on every GPU: bound pods keep what their
  # assignments name.
  add_test(NAME sharing_replay_random-restarts-stale
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/scripts/sharing_replay_random.py
                   --bench $<TARGET_FILE:tessera-bench-sharing-replay> --seed 41 --count 20
                   --restart-every 97 --stale-reports)
  # The same, with every other new core told that the nodes have 70% of their CPU and memory:
  # bound pods beyond what their node has keep their GPUs, also when a preemption attempt
  # evicts and puts them back.
  add_test(NAME sharing_replay_random-restarts-shrink
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/scripts/sharing_replay_random.py
                   --bench $<TARGET_FILE:tessera-bench-sharing-replay> --seed 61 --count 20
                   --restart-every 97 --shrink-host 0.7)
  set_tests_properties(sharing_replay_random sharing_replay_random-regressions
                       sharing_replay_random-restarts sharing_replay_random-restarts-often
                       sharing_replay_random-restarts-stale sharing_replay_random-restarts-shrink
                       PROPERTIES LABELS unit TIMEOUT 600 ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
  add_test(NAME sharing_replay_small_static_mig
           COMMAND tessera-bench-sharing-replay --static-mig --scenario
                   ${CMAKE_SOURCE_DIR}/bench/scenarios/sharing-small.json)
  set_tests_properties(sharing_replay_small_static_mig PROPERTIES LABELS unit TIMEOUT 120)
endif()
