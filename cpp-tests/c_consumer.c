/* A plain C host: version, a result message, the panic boundary, a NULL argument. */
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
  if (gpusvc_gl_context_open(GPUSVC_GL_API_AUTO, NULL) != GPUSVC_NULL_ARGUMENT) {
    fprintf(stderr, "NULL out accepted\n");
    return 1;
  }
  gpusvc_gl_context_free(NULL);
  printf("gpusvc %s from C: ok\n", version);
  return 0;
}
