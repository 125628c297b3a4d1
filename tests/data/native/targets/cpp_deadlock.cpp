// Real C++ hangs for native backtraces with demangled frames: two worker threads of a class
// template in an anonymous namespace take two std::mutex in opposite order (lock-order deadlock),
// and a third waits on a std::condition_variable nobody notifies. The main thread joins them.
// Usage: cpp_deadlock --ready FILE
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

template <typename Payload>
class Shard {
 public:
  explicit Shard(std::string name) : name_(std::move(name)) {}
  std::mutex mu;
  Payload value{};
  std::string name_;
};

template <typename Payload>
class Rebalancer {
 public:
  Rebalancer(Shard<Payload>& from, Shard<Payload>& to) : from_(from), to_(to) {}
  void move_one() {
    std::lock_guard<std::mutex> first(from_.mu);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::lock_guard<std::mutex> second(to_.mu);  // the other Rebalancer holds it
    to_.value += from_.value;
  }

 private:
  Shard<Payload>& from_;
  Shard<Payload>& to_;
};

struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [this] { return done; });  // nobody sets done
  }
};

}  // namespace

int main(int argc, char** argv) {
  const char* ready = argc > 2 && std::strcmp(argv[1], "--ready") == 0 ? argv[2] : nullptr;
  Shard<long> a("a"), b("b");
  Rebalancer<long> ab(a, b), ba(b, a);
  Completion completion;
  std::vector<std::thread> threads;
  threads.emplace_back([&ab] { ab.move_one(); });
  threads.emplace_back(&Rebalancer<long>::move_one, &ba);
  threads.emplace_back(std::bind(&Completion::wait, &completion));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  if (ready) {
    std::ofstream(ready) << getpid();
  }
  for (auto& t : threads) t.join();
  return 0;
}
