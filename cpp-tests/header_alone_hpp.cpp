// gpusvc.hpp is self-contained: this translation unit includes nothing else.
#include "gpusvc.hpp"

int gpusvc_header_alone_hpp();
int gpusvc_header_alone_hpp() {
  gpusvc::GlContextPtr ctx;
  return ctx ? 1 : 0;
}
