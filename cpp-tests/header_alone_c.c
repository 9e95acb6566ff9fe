/* gpusvc.h is self-contained C11: this translation unit includes nothing else. */
#include "gpusvc.h"

int gpusvc_header_alone_c(void);
int gpusvc_header_alone_c(void) {
  gpusvc_result ok = GPUSVC_OK;
  gpusvc_gl_api api = GPUSVC_GL_API_AUTO;
  struct gpusvc_gl_context *ctx = NULL;
  size_t n = 0;
  (void)ctx;
  (void)n;
  return (int)ok + (int)api;
}
