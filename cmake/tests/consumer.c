/* A C host of an installed or imported libgpusvc (cmake/tests/package.sh): the library's
 * version, a result message, the panic boundary and a scheduler made and freed, with no GL
 * context, so it runs against a build with or without the `gl` feature. */
#include <stdio.h>
#include <string.h>

#include "gpusvc.h"

int main(void) {
  char buf[64];
  size_t len = 0;
  const char *version = gpusvc_version();
  if (version == NULL || strlen(version) == 0) {
    fprintf(stderr, "empty version\n");
    return 1;
  }
  if (gpusvc_result_message(GPUSVC_NULL_ARGUMENT, buf, sizeof buf, &len) != GPUSVC_OK ||
      strstr(buf, "NULL") == NULL || len != strlen(buf)) {
    fprintf(stderr, "bad message: %s\n", buf);
    return 1;
  }
  if (gpusvc_debug_panic() != GPUSVC_PANIC) {
    fprintf(stderr, "panic not caught\n");
    return 1;
  }
  printf("gpusvc %s consumer: ok\n", version);
  return 0;
}
