// Two threads take two absl::Mutex in opposite order; the main thread waits on an
// absl::Notification the workers would have notified. Usage: absl_deadlock --ready FILE
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace cache {

class Table {
 public:
  absl::Mutex mu;
  int rows = 0;
};

void Transfer(Table* from, Table* to, absl::Notification* done) {
  absl::MutexLock first(&from->mu);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  absl::MutexLock second(&to->mu);  // the other thread holds it
  to->rows += from->rows;
  done->Notify();
}

}  // namespace cache

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const char* ready = argc > 2 && std::strcmp(argv[1], "--ready") == 0 ? argv[2] : nullptr;
  cache::Table a, b;
  absl::Notification n1, n2;
  std::thread t1(cache::Transfer, &a, &b, &n1);
  std::thread t2(cache::Transfer, &b, &a, &n2);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  if (ready) std::ofstream(ready) << getpid();
  n1.WaitForNotification();
  t1.join();
  t2.join();
  return 0;
}
