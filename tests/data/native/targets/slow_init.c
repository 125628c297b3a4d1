/* A shared library whose constructor never returns: whoever dlopen()s it stays inside dlopen,
 * holding the dynamic loader's lock (_dl_load_lock). Built by record.sh for native_locks.py fork-dlopen. */
#include <unistd.h>

__attribute__((constructor)) static void wait_for_config(void) {
  for (;;) pause();
}

int slow_init_version(void) { return 1; }
