/* A library with a lock of its own and a destructor that takes it (a flush at exit), for
 * native_locks.py exit: a thread of the parent holds the lock when the main thread forks, and the
 * child's exit() runs the destructor (__run_exit_handlers -> _dl_fini), which waits for a lock whose
 * owner thread is not in the child. */
#include <pthread.h>
#include <unistd.h>

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

void registry_update_forever(void) {
  pthread_mutex_lock(&registry_lock);
  for (;;) pause(); /* a long update: the lock stays held */
}

__attribute__((destructor)) static void registry_flush(void) {
  pthread_mutex_lock(&registry_lock);
  pthread_mutex_unlock(&registry_lock);
}
