// A thread that runs one shard's operations for as long as a pipeline lives.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>
#include <utility>

namespace tessera {

// A thread that runs one shard's operations for as long as the pipeline lives, so a device's work
// stays on one thread instead of a new thread per operation.
class ShardWorker {
 public:
  // The jthread, destroyed first, asks the loop to stop (which wakes its wait) and joins it.
  ShardWorker() : thread_([this](std::stop_token stop) { loop(stop); }) {}

  void post(std::function<void()> job) {
    std::lock_guard lock(mu_);
    job_ = std::move(job);
    done_ = false;
    cv_.notify_all();
  }
  // Waits for the posted job; rethrows its error.
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    if (auto e = std::exchange(error_, nullptr)) std::rethrow_exception(e);
  }

 private:
  void loop(std::stop_token stop) {
    std::unique_lock lock(mu_);
    while (cv_.wait(lock, stop, [&] { return job_ != nullptr; })) {
      auto job = std::exchange(job_, nullptr);
      lock.unlock();
      std::exception_ptr error;
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      error_ = error;
      done_ = true;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable_any cv_;
  std::function<void()> job_;
  bool done_ = true;
  std::exception_ptr error_;
  std::jthread thread_;  // last: it starts with everything above in place, and stops first
};

}  // namespace tessera
