// Runs independent jobs on a pool of threads: the policy x seed matrices of the simulators.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace tessera {

// Calls job(i) once for every i in [0, jobs), on min(threads, jobs) threads (threads = 0: the
// hardware concurrency), each taking the next index as it finishes one, and returns once every
// call has returned. Jobs must write only their own results.
template <typename Job>
void ParallelFor(size_t jobs, unsigned threads, Job&& job) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, jobs));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t j; (j = next.fetch_add(1)) < jobs;) job(j);
  };
  if (threads <= 1) {
    worker();
    return;
  }
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
}

}  // namespace tessera
