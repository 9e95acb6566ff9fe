// gpusvc.hpp: RAII wrappers over the gpusvc C ABI (gpusvc.h) for C++ hosts.
//
// Handles are std::unique_ptr with deleters that call the matching gpusvc_*_free, so a handle
// cannot leak or be freed twice. Nothing here throws: browser GPU processes are commonly built
// with -fno-exceptions, so fallible calls return gpusvc_result and write their output only on
// GPUSVC_OK, exactly like the C functions they wrap.
#ifndef GPUSVC_HPP
#define GPUSVC_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpusvc.h"

namespace gpusvc {

// Deleter for gpusvc_gl_context; free must happen on the thread that opened the context.
struct GlContextDeleter {
  void operator()(gpusvc_gl_context* ctx) const noexcept { gpusvc_gl_context_free(ctx); }
};
using GlContextPtr = std::unique_ptr<gpusvc_gl_context, GlContextDeleter>;

// The library version, e.g. "0.1.0".
inline std::string Version() { return gpusvc_version(); }

// The message for a result code (any uint32_t; unknown codes get a message too).
inline std::string ResultMessage(uint32_t code) {
  char buf[256];
  size_t len = 0;
  if (gpusvc_result_message(code, buf, sizeof buf, &len) != GPUSVC_OK) return std::string();
  return std::string(buf, len);
}

// The detail of the last failing gpusvc call on this thread.
inline std::string LastErrorDetail() {
  std::vector<char> buf(1024);
  size_t len = 0;
  if (gpusvc_last_error_detail(buf.data(), buf.size(), &len) != GPUSVC_OK) return std::string();
  return std::string(buf.data(), len);
}

// Opens a headless GL context (api: a gpusvc_gl_api value) into *out.
inline gpusvc_result OpenGlContext(uint32_t api, GlContextPtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_gl_context* raw = nullptr;
  gpusvc_result r = gpusvc_gl_context_open(api, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// What the driver says about itself.
struct DriverIdentity {
  std::string vendor;
  std::string renderer;
  std::string version;
  std::string glsl_version;
  uint32_t api = 0;  // gpusvc_gl_api
  bool software = false;
  std::vector<uint32_t> program_binary_formats;
};

// Reads the driver identity of `ctx` into *out.
inline gpusvc_result ReadDriverIdentity(const gpusvc_gl_context* ctx, DriverIdentity* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  DriverIdentity id;
  const char* s = nullptr;
  gpusvc_result r = gpusvc_gl_context_vendor(ctx, &s);
  if (r != GPUSVC_OK) return r;
  id.vendor = s;
  if ((r = gpusvc_gl_context_renderer(ctx, &s)) != GPUSVC_OK) return r;
  id.renderer = s;
  if ((r = gpusvc_gl_context_version(ctx, &s)) != GPUSVC_OK) return r;
  id.version = s;
  if ((r = gpusvc_gl_context_glsl_version(ctx, &s)) != GPUSVC_OK) return r;
  id.glsl_version = s;
  if ((r = gpusvc_gl_context_api(ctx, &id.api)) != GPUSVC_OK) return r;
  if ((r = gpusvc_gl_context_is_software(ctx, &id.software)) != GPUSVC_OK) return r;
  size_t count = 0;
  if ((r = gpusvc_gl_context_program_binary_formats(ctx, nullptr, 0, &count)) != GPUSVC_OK)
    return r;
  id.program_binary_formats.resize(count);
  if (count > 0) {
    r = gpusvc_gl_context_program_binary_formats(ctx, id.program_binary_formats.data(), count,
                                                 &count);
    if (r != GPUSVC_OK) return r;
  }
  *out = std::move(id);
  return GPUSVC_OK;
}

}  // namespace gpusvc

#endif  // GPUSVC_HPP
