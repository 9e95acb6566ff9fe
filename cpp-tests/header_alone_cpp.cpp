// gpusvc.h is self-contained C++: this translation unit includes nothing else.
#include "gpusvc.h"

int gpusvc_header_alone_cpp();
int gpusvc_header_alone_cpp() {
  gpusvc_result ok = GPUSVC_OK;
  gpusvc_gl_context* ctx = nullptr;
  (void)ctx;
  return static_cast<int>(ok) + static_cast<int>(GPUSVC_GL_API_AUTO);
}
