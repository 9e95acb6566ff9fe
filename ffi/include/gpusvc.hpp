// gpusvc.hpp: RAII wrappers over the gpusvc C ABI (gpusvc.h) for C++ hosts.
//
// Handles are std::unique_ptr with deleters that call the matching gpusvc_*_free, so a handle
// cannot leak or be freed twice. Nothing here throws: browser GPU processes are commonly built
// with -fno-exceptions, so fallible calls return gpusvc_result and write their output only on
// GPUSVC_OK, exactly like the C functions they wrap.
#ifndef GPUSVC_HPP
#define GPUSVC_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpusvc.h"

namespace gpusvc {

// Deleter for gpusvc_gl_context; free must happen on the thread that opened the context.
struct GlContextDeleter {
  void operator()(gpusvc_gl_context* ctx) const noexcept { gpusvc_gl_context_free(ctx); }
};
using GlContextPtr = std::unique_ptr<gpusvc_gl_context, GlContextDeleter>;

// Deleters for the program-cache handles. Their _free functions return a gpusvc_result (a freed
// or foreign handle is GPUSVC_INVALID_HANDLE, a thread-bound one freed off its thread
// GPUSVC_WRONG_THREAD); a unique_ptr frees each exactly once, on the thread that destroys it.
struct ProgramCacheDeleter {
  void operator()(gpusvc_program_cache* p) const noexcept { (void)gpusvc_program_cache_free(p); }
};
struct CachedProgramDeleter {
  void operator()(gpusvc_program_cache_entry* p) const noexcept { (void)gpusvc_program_cache_entry_free(p); }
};
struct ProgramManagerDeleter {
  void operator()(gpusvc_program_manager* p) const noexcept {
    (void)gpusvc_program_manager_free(p);
  }
};
struct ShaderDeleter {
  void operator()(gpusvc_program_manager_shader* p) const noexcept { (void)gpusvc_program_manager_shader_free(p); }
};
struct LinkedProgramDeleter {
  void operator()(gpusvc_program_manager_linked_program* p) const noexcept { (void)gpusvc_program_manager_linked_program_free(p); }
};
struct PendingLinkDeleter {
  void operator()(gpusvc_program_manager_pending_link* p) const noexcept {
    (void)gpusvc_program_manager_pending_link_free(p);
  }
};
// Any thread; freeing it while managers still use it is fine (they share it).
using ProgramCachePtr = std::unique_ptr<gpusvc_program_cache, ProgramCacheDeleter>;
// A copy of one cached program; any thread.
using CachedProgramPtr = std::unique_ptr<gpusvc_program_cache_entry, CachedProgramDeleter>;
// Bound to the thread that made it, like its shaders and linked programs.
using ProgramManagerPtr = std::unique_ptr<gpusvc_program_manager, ProgramManagerDeleter>;
using ShaderPtr = std::unique_ptr<gpusvc_program_manager_shader, ShaderDeleter>;
using LinkedProgramPtr = std::unique_ptr<gpusvc_program_manager_linked_program, LinkedProgramDeleter>;
// A started link (gpusvc::StartLink); FinishLink consumes it, dropping it abandons the link.
using PendingLinkPtr = std::unique_ptr<gpusvc_program_manager_pending_link, PendingLinkDeleter>;

// The library version, e.g. "0.1.0".
inline std::string Version() { return gpusvc_version(); }

// A zeroed struct with its struct_size set to sizeof(T), as every config, descriptor, report and
// snapshot struct must be before it is passed to gpusvc (the library reads or writes only
// struct_size bytes; see GPUSVC_UNSUPPORTED_STRUCT_SIZE).
template <typename T>
inline T Sized() {
  T v{};
  v.struct_size = sizeof(T);
  return v;
}

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

// ---- program cache ----

// The defaults of a GPUSVC_PROGRAM_CACHE_PROFILE_* value into *out (made whole: zeroed, with
// struct_size set).
inline gpusvc_result ProgramCacheDefaults(uint32_t profile, gpusvc_program_cache_config* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  *out = Sized<gpusvc_program_cache_config>();
  return gpusvc_program_cache_config_defaults(profile, out);
}

// Creates a program cache into *out; `histogram` (may be null) gets the samples, one call at a
// time and none once *out is reset (see gpusvc_program_cache_histogram_callback).
inline gpusvc_result NewProgramCache(const gpusvc_program_cache_config& config,
                                     ProgramCachePtr* out,
                                     gpusvc_program_cache_histogram_callback histogram = nullptr,
                                     void* user_data = nullptr) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_cache* raw = nullptr;
  gpusvc_result r = gpusvc_program_cache_new(&config, histogram, user_data, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Hash of a shader as compiled (stage: GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*; options: opaque bytes).
inline gpusvc_result ShaderHash(uint32_t stage, const std::string& source, gpusvc_program_cache_sha1* out,
                                const std::string& options = std::string()) {
  return gpusvc_program_cache_shader_hash(
      stage, source.data(), source.size(), reinterpret_cast<const uint8_t*>(options.data()),
      options.size(), out);
}

// Hash of a shader as a program manager with `backend_identity` compiles it: what ShaderHash
// covers plus that identity (what gpusvc_program_manager_shader_compiled_hash reports).
inline gpusvc_result BackendShaderHash(uint32_t stage, const std::string& source,
                                       const std::string& backend_identity,
                                       gpusvc_program_cache_sha1* out,
                                       const std::string& options = std::string()) {
  return gpusvc_program_cache_backend_shader_hash(
      stage, source.data(), source.size(), reinterpret_cast<const uint8_t*>(options.data()),
      options.size(), backend_identity.c_str(), out);
}

// Link options: attribute bindings and transform feedback (part of the key), and the page.
struct LinkOptions {
  std::vector<std::pair<std::string, uint32_t>> attribute_bindings;
  std::vector<std::string> transform_feedback_varyings;
  uint32_t transform_feedback_mode = GPUSVC_PROGRAM_CACHE_TRANSFORM_FEEDBACK_INTERLEAVED;
  bool has_page = false;
  uint64_t page = 0;
  // GL_PROGRAM_SEPARABLE (a program for a program pipeline).
  bool separable = false;
};

// The C view of LinkOptions; valid while both objects live and are unchanged.
class LinkOptionsView {
 public:
  explicit LinkOptionsView(const LinkOptions& o) {
    for (const auto& b : o.attribute_bindings) bindings_.push_back({b.first.c_str(), b.second});
    for (const auto& v : o.transform_feedback_varyings) varyings_.push_back(v.c_str());
    options_.link.attribute_bindings = bindings_.empty() ? nullptr : bindings_.data();
    options_.link.attribute_binding_count = bindings_.size();
    options_.link.transform_feedback_varyings = varyings_.empty() ? nullptr : varyings_.data();
    options_.link.transform_feedback_varying_count = varyings_.size();
    options_.link.transform_feedback_mode = o.transform_feedback_mode;
    options_.has_page = o.has_page;
    options_.page = o.page;
    options_.separable = o.separable;
  }
  LinkOptionsView(const LinkOptionsView&) = delete;
  LinkOptionsView& operator=(const LinkOptionsView&) = delete;
  const gpusvc_program_cache_link_options* link() const { return &options_.link; }
  const gpusvc_program_manager_program_options* program() const { return &options_; }

 private:
  std::vector<gpusvc_program_cache_attribute_binding> bindings_;
  std::vector<const char*> varyings_;
  gpusvc_program_manager_program_options options_ = Sized<gpusvc_program_manager_program_options>();
};

// The program key of two shader hashes, a backend identity and link options.
inline gpusvc_result ProgramKey(const gpusvc_program_cache_sha1& vertex, const gpusvc_program_cache_sha1& fragment,
                                const std::string& backend_identity, const LinkOptions& options,
                                gpusvc_program_cache_sha1* out) {
  LinkOptionsView view(options);
  gpusvc_program_cache_program_key_input input{};
  input.struct_size = sizeof(input);
  input.vertex = vertex;
  input.fragment = fragment;
  input.backend_identity = backend_identity.c_str();
  input.link = *view.link();
  return gpusvc_program_cache_program_key(&input, out);
}

// One entry of a shader's variable map.
struct Variable {
  std::string name;
  std::string mapped_name;
  uint32_t gl_type = 0;
  int32_t array_size = 1;
  bool has_location = false;
  int32_t location = -1;
  bool operator==(const Variable& o) const {
    return name == o.name && mapped_name == o.mapped_name && gl_type == o.gl_type &&
           array_size == o.array_size && has_location == o.has_location &&
           (!has_location || location == o.location);
  }
  bool operator!=(const Variable& o) const { return !(*this == o); }
};

// A shader's variable maps: attributes, uniforms, varyings and fragment outputs.
struct ShaderVariables {
  std::vector<Variable> attributes;
  std::vector<Variable> uniforms;
  std::vector<Variable> varyings;
  std::vector<Variable> outputs;
  bool operator==(const ShaderVariables& o) const {
    return attributes == o.attributes && uniforms == o.uniforms && varyings == o.varyings &&
           outputs == o.outputs;
  }
  bool operator!=(const ShaderVariables& o) const { return !(*this == o); }
};

// The C view of ShaderVariables; valid while both objects live and are unchanged.
class ShaderVariablesView {
 public:
  explicit ShaderVariablesView(const ShaderVariables& v)
      : attributes_(Convert(v.attributes)), uniforms_(Convert(v.uniforms)) {
    view_.attributes = attributes_.empty() ? nullptr : attributes_.data();
    view_.attribute_count = attributes_.size();
    view_.uniforms = uniforms_.empty() ? nullptr : uniforms_.data();
    view_.uniform_count = uniforms_.size();
  }
  ShaderVariablesView(const ShaderVariablesView&) = delete;
  ShaderVariablesView& operator=(const ShaderVariablesView&) = delete;
  const gpusvc_program_cache_shader_variables& get() const { return view_; }

 public:
  // The C form of a variable list (its strings point into `list`).
  static std::vector<gpusvc_program_cache_variable_info> Convert(const std::vector<Variable>& list) {
    std::vector<gpusvc_program_cache_variable_info> out;
    for (const Variable& v : list) {
      gpusvc_program_cache_variable_info info{};
      info.name = v.name.c_str();
      info.mapped_name = v.mapped_name.c_str();
      info.gl_type = v.gl_type;
      info.array_size = v.array_size;
      info.has_location = v.has_location;
      info.location = v.location;
      out.push_back(info);
    }
    return out;
  }

 private:
  std::vector<gpusvc_program_cache_variable_info> attributes_;
  std::vector<gpusvc_program_cache_variable_info> uniforms_;
  gpusvc_program_cache_shader_variables view_{};
};

inline Variable ToVariable(const gpusvc_program_cache_variable_info& info) {
  Variable v;
  v.name = info.name != nullptr ? info.name : "";
  v.mapped_name = info.mapped_name != nullptr ? info.mapped_name : "";
  v.gl_type = info.gl_type;
  v.array_size = info.array_size;
  v.has_location = info.has_location;
  v.location = info.location;
  return v;
}

// A cached program in C++ terms (for SaveProgram and ReadCachedProgram).
struct CachedProgram {
  gpusvc_program_cache_sha1 vertex_shader{};
  gpusvc_program_cache_sha1 fragment_shader{};
  ShaderVariables vertex;
  ShaderVariables fragment;
  uint32_t binary_format = 0;
  std::vector<uint8_t> binary;
  bool has_page = false;
  uint64_t page = 0;
};

// Saves `program` under `key` (everything is copied); *report (may be null) says what it did.
inline gpusvc_result SaveProgram(const gpusvc_program_cache* cache, const gpusvc_program_cache_sha1& key,
                                 const CachedProgram& program,
                                 gpusvc_program_cache_save_report* report = nullptr) {
  ShaderVariablesView vertex(program.vertex);
  ShaderVariablesView fragment(program.fragment);
  gpusvc_program_cache_entry_desc desc{};
  desc.struct_size = sizeof(desc);
  desc.vertex_shader = program.vertex_shader;
  desc.fragment_shader = program.fragment_shader;
  desc.vertex = vertex.get();
  desc.fragment = fragment.get();
  desc.binary_format = program.binary_format;
  desc.binary = program.binary.empty() ? nullptr : program.binary.data();
  desc.binary_len = program.binary.size();
  desc.has_page = program.has_page;
  desc.page = program.page;
  gpusvc_program_cache_save_report ignored = Sized<gpusvc_program_cache_save_report>();
  if (report != nullptr) report->struct_size = sizeof(*report);
  return gpusvc_program_cache_save(cache, &key, &desc, report != nullptr ? report : &ignored);
}

// Loads (counts, promotes) a program into *out; GPUSVC_PROGRAM_CACHE_NOT_FOUND on a miss.
inline gpusvc_result LoadProgram(const gpusvc_program_cache* cache, const gpusvc_program_cache_sha1& key,
                                 CachedProgramPtr* out, bool has_page = false,
                                 uint64_t page = 0) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_cache_entry* raw = nullptr;
  gpusvc_result r = gpusvc_program_cache_load(cache, &key, has_page, page, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Like LoadProgram without touching recency or counters.
inline gpusvc_result PeekProgram(const gpusvc_program_cache* cache, const gpusvc_program_cache_sha1& key,
                                 CachedProgramPtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_cache_entry* raw = nullptr;
  gpusvc_result r = gpusvc_program_cache_peek(cache, &key, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Looks up a recorded failure (a compile failure under gpusvc_program_cache_compile_failure_key,
// a link failure under its program key); read it with EntryFailure.
inline gpusvc_result LoadFailure(const gpusvc_program_cache* cache, const gpusvc_program_cache_sha1& key,
                                 CachedProgramPtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_cache_entry* raw = nullptr;
  gpusvc_result r = gpusvc_program_cache_load_failure(cache, &key, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// What an entry records (GPUSVC_PROGRAM_CACHE_FAILURE_*), the failed stage of a compile
// failure, and the driver's info log byte for byte (empty for a program).
inline gpusvc_result EntryFailure(const gpusvc_program_cache_entry* p, uint32_t* failure, uint32_t* stage,
                                  std::string* log) {
  if (log == nullptr) return GPUSVC_NULL_ARGUMENT;
  size_t len = 0;
  gpusvc_result r = gpusvc_program_cache_entry_failure(p, failure, stage, nullptr, 0, &len);
  if (r != GPUSVC_OK) return r;
  std::vector<char> buf(len + 1);
  r = gpusvc_program_cache_entry_failure(p, failure, stage, buf.data(), buf.size(), &len);
  if (r == GPUSVC_OK) log->assign(buf.data(), len);
  return r;
}

inline gpusvc_result ReadCachedVariables(const gpusvc_program_cache_entry* p, uint32_t stage,
                                         uint32_t kind, std::vector<Variable>* out) {
  size_t n = 0;
  gpusvc_result r = gpusvc_program_cache_entry_variable_count(p, stage, kind, &n);
  if (r != GPUSVC_OK) return r;
  std::vector<Variable> list;
  for (size_t i = 0; i < n; ++i) {
    gpusvc_program_cache_variable_info info{};
    if ((r = gpusvc_program_cache_entry_variable(p, stage, kind, i, &info)) != GPUSVC_OK) return r;
    list.push_back(ToVariable(info));
  }
  *out = std::move(list);
  return GPUSVC_OK;
}

// Copies a cached program out (hashes, maps, binary) into *out.
inline gpusvc_result ReadCachedProgram(const gpusvc_program_cache_entry* p, CachedProgram* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  CachedProgram c;
  gpusvc_result r = gpusvc_program_cache_entry_shader_hashes(p, &c.vertex_shader, &c.fragment_shader);
  if (r != GPUSVC_OK) return r;
  size_t len = 0;
  if ((r = gpusvc_program_cache_entry_binary(p, &c.binary_format, nullptr, 0, &len)) != GPUSVC_OK)
    return r;
  c.binary.resize(len);
  if (len > 0 && (r = gpusvc_program_cache_entry_binary(p, &c.binary_format, c.binary.data(), len,
                                                   &len)) != GPUSVC_OK)
    return r;
  const struct {
    uint32_t stage;
    ShaderVariables* vars;
  } stages[] = {{GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, &c.vertex},
                {GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, &c.fragment}};
  for (const auto& s : stages) {
    r = ReadCachedVariables(p, s.stage, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE, &s.vars->attributes);
    if (r != GPUSVC_OK) return r;
    r = ReadCachedVariables(p, s.stage, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM, &s.vars->uniforms);
    if (r != GPUSVC_OK) return r;
  }
  *out = std::move(c);
  return GPUSVC_OK;
}

// The cached keys in eviction order (next victim first).
inline gpusvc_result EvictionOrder(const gpusvc_program_cache* cache,
                                   std::vector<gpusvc_program_cache_sha1>* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  size_t n = 0;
  gpusvc_result r = gpusvc_program_cache_eviction_order(cache, nullptr, 0, &n);
  if (r != GPUSVC_OK) return r;
  std::vector<gpusvc_program_cache_sha1> keys(n);
  if (n > 0 && (r = gpusvc_program_cache_eviction_order(cache, keys.data(), n, &n)) != GPUSVC_OK)
    return r;
  keys.resize(n);
  *out = std::move(keys);
  return GPUSVC_OK;
}

// ---- program cache: statistics, statuses and maintenance ----

// A snapshot of the cache's counters, bytes and programs into *out (left alone on error).
inline gpusvc_result ProgramCacheStats(const gpusvc_program_cache* cache,
                                       gpusvc_program_cache_stats_snapshot* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_cache_stats_snapshot s = Sized<gpusvc_program_cache_stats_snapshot>();
  gpusvc_result r = gpusvc_program_cache_stats(cache, &s);
  if (r == GPUSVC_OK) *out = s;
  return r;
}

// The configuration the cache was made with into *out (left alone on error).
inline gpusvc_result ProgramCacheCurrentConfig(const gpusvc_program_cache* cache,
                                               gpusvc_program_cache_config* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_cache_config c = Sized<gpusvc_program_cache_config>();
  gpusvc_result r = gpusvc_program_cache_current_config(cache, &c);
  if (r == GPUSVC_OK) *out = c;
  return r;
}

// The disk store's statistics into *out (all zero and `configured` false without a store; left
// alone on error).
inline gpusvc_result ProgramCacheDiskStats(const gpusvc_program_cache* cache,
                                           gpusvc_program_cache_disk_stats_snapshot* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_cache_disk_stats_snapshot s = Sized<gpusvc_program_cache_disk_stats_snapshot>();
  gpusvc_result r = gpusvc_program_cache_disk_stats(cache, &s);
  if (r == GPUSVC_OK) *out = s;
  return r;
}

// The name of histogram `index` (0-based) into *out; past the last one GPUSVC_INVALID_ARGUMENT
// (*out left alone).
inline gpusvc_result HistogramName(size_t index, std::string* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  const char* name = nullptr;
  gpusvc_result r = gpusvc_program_cache_histogram_name(index, &name);
  if (r == GPUSVC_OK) out->assign(name != nullptr ? name : "");
  return r;
}

// Every histogram name, in index order.
inline std::vector<std::string> HistogramNames() {
  std::vector<std::string> names;
  std::string name;
  for (size_t i = 0; HistogramName(i, &name) == GPUSVC_OK; ++i) names.push_back(name);
  return names;
}

// The summary of histogram `name` (one of HistogramNames()) into *out: all zeros while it has
// no samples; an unknown name (or one holding a NUL) is GPUSVC_INVALID_ARGUMENT, *out left alone.
inline gpusvc_result HistogramSummary(const gpusvc_program_cache* cache, const std::string& name,
                                      gpusvc_program_cache_histogram_summary* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  if (name.find('\0') != std::string::npos) return GPUSVC_INVALID_ARGUMENT;
  gpusvc_program_cache_histogram_summary s = Sized<gpusvc_program_cache_histogram_summary>();
  gpusvc_result r = gpusvc_program_cache_histogram(cache, name.c_str(), &s);
  if (r == GPUSVC_OK) *out = s;
  return r;
}

// The stages a cached program has (bit 1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_* per stage)
// into *out.
inline gpusvc_result CachedProgramStages(const gpusvc_program_cache_entry* p, uint32_t* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  uint32_t mask = 0;
  gpusvc_result r = gpusvc_program_cache_entry_stages(p, &mask);
  if (r == GPUSVC_OK) *out = mask;
  return r;
}

// The link status of the program of `key` (GPUSVC_PROGRAM_CACHE_LINK_STATUS_*: SUCCESS while
// its binary is cached) into *out.
inline gpusvc_result CachedLinkStatus(const gpusvc_program_cache* cache,
                                      const gpusvc_program_cache_sha1& key, uint32_t* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  uint32_t status = 0;
  gpusvc_result r = gpusvc_program_cache_link_status(cache, &key, &status);
  if (r == GPUSVC_OK) *out = status;
  return r;
}

// The compile status of the shader of `hash` (GPUSVC_PROGRAM_CACHE_COMPILE_STATUS_*) into *out.
// A program manager's statuses are under BackendShaderHash with its backend identity.
inline gpusvc_result CachedCompileStatus(const gpusvc_program_cache* cache,
                                         const gpusvc_program_cache_sha1& hash, uint32_t* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  uint32_t status = 0;
  gpusvc_result r = gpusvc_program_cache_shader_compile_status(cache, &hash, &status);
  if (r == GPUSVC_OK) *out = status;
  return r;
}

// Records that the shader of `hash` compiled (a program manager then defers the compile of a
// shader marked under BackendShaderHash with its backend identity).
inline gpusvc_result MarkShaderCompiled(const gpusvc_program_cache* cache,
                                        const gpusvc_program_cache_sha1& hash) {
  return gpusvc_program_cache_mark_shader_compiled(cache, &hash);
}

// How many cached programs use the shader of `hash` into *out.
inline gpusvc_result ShaderRefcount(const gpusvc_program_cache* cache,
                                    const gpusvc_program_cache_sha1& hash, uint32_t* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  uint32_t n = 0;
  gpusvc_result r = gpusvc_program_cache_shader_refcount(cache, &hash, &n);
  if (r == GPUSVC_OK) *out = n;
  return r;
}

// Removes the program of `key`; whether it was there into *removed (may be null).
inline gpusvc_result EvictProgram(const gpusvc_program_cache* cache,
                                  const gpusvc_program_cache_sha1& key, bool* removed = nullptr) {
  bool was = false;
  gpusvc_result r = gpusvc_program_cache_evict(cache, &key, &was);
  if (r == GPUSVC_OK && removed != nullptr) *removed = was;
  return r;
}

// Evicts by policy until at most `limit` bytes are stored; the bytes freed into *freed (may be
// null).
inline gpusvc_result TrimProgramCache(const gpusvc_program_cache* cache, size_t limit,
                                      size_t* freed = nullptr) {
  size_t n = 0;
  gpusvc_result r = gpusvc_program_cache_trim(cache, limit, &n);
  if (r == GPUSVC_OK && freed != nullptr) *freed = n;
  return r;
}

// Applies a memory-pressure level (GPUSVC_PROGRAM_CACHE_MEMORY_PRESSURE_*); the bytes freed
// into *freed (may be null).
inline gpusvc_result SetMemoryPressure(const gpusvc_program_cache* cache, uint32_t level,
                                       size_t* freed = nullptr) {
  size_t n = 0;
  gpusvc_result r = gpusvc_program_cache_set_memory_pressure(cache, level, &n);
  if (r == GPUSVC_OK && freed != nullptr) *freed = n;
  return r;
}

// Drops every program and status (statistics are kept; a disk store's entries go too, once
// FlushDisk returns).
inline gpusvc_result ClearProgramCache(const gpusvc_program_cache* cache) {
  return gpusvc_program_cache_clear(cache);
}

// Marks programs hot: on the next start they load from disk before the others (keys copied; a
// no-op without a disk store).
inline gpusvc_result MarkHot(const gpusvc_program_cache* cache,
                             const std::vector<gpusvc_program_cache_sha1>& keys) {
  return gpusvc_program_cache_mark_hot(cache, keys.empty() ? nullptr : keys.data(), keys.size());
}

// Waits until the disk writer has done everything queued so far (a no-op without a store).
inline gpusvc_result FlushDisk(const gpusvc_program_cache* cache) {
  return gpusvc_program_cache_flush_disk(cache);
}

// Waits until the persistence thread has handed everything queued so far to the sink (a no-op
// without one; GPUSVC_HANDLE_BUSY from inside a persistence sink callback).
inline gpusvc_result FlushPersist(const gpusvc_program_cache* cache) {
  return gpusvc_program_cache_flush_persist(cache);
}

// ---- the disk store of a program cache ----

// A disk store's configuration in C++ terms (see gpusvc_program_cache_disk_config); Defaults() matches
// gpusvc_program_cache_disk_config_defaults.
struct DiskOptions {
  bool enabled = true;
  std::string dir;            // the cache folder (bytes; a profile folder in a browser)
  std::string host_product;   // which embedder / browser channel ("chrome-stable")
  std::string host_version;   // browser version + build, translator version
  bool has_vendor_id = false;
  uint32_t vendor_id = 0;
  bool has_device_id = false;
  uint32_t device_id = 0;
  bool has_driver_build_id = false;
  std::string driver_build_id;
  uint64_t budget_bytes = 0;  // 0: the memory budget
  bool compress = true;
  uint32_t max_consecutive_rejections = 3;
  gpusvc_program_cache_disk_log_callback log = nullptr;  // any thread; must not throw
  void* log_user_data = nullptr;

  static DiskOptions Defaults() {
    DiskOptions o;
    gpusvc_program_cache_disk_config c{};
    c.struct_size = sizeof(c);
    if (gpusvc_program_cache_disk_config_defaults(&c) == GPUSVC_OK) {
      o.enabled = c.enabled;
      o.budget_bytes = c.budget_bytes;
      o.compress = c.compress;
      o.max_consecutive_rejections = c.max_consecutive_rejections;
    }
    return o;
  }

  // The C view; valid while this object lives and is unchanged.
  gpusvc_program_cache_disk_config View() const {
    gpusvc_program_cache_disk_config c{};
    c.struct_size = sizeof(c);
    c.enabled = enabled;
    c.dir = dir.data();
    c.dir_len = dir.size();
    c.host_product = host_product.c_str();
    c.host_version = host_version.c_str();
    c.has_vendor_id = has_vendor_id;
    c.vendor_id = vendor_id;
    c.has_device_id = has_device_id;
    c.device_id = device_id;
    c.driver_build_id = has_driver_build_id ? driver_build_id.c_str() : nullptr;
    c.budget_bytes = budget_bytes;
    c.compress = compress;
    c.max_consecutive_rejections = max_consecutive_rejections;
    c.log = log;
    c.log_user_data = log_user_data;
    return c;
  }
};

// A driver identity for the stamp: GL_VENDOR, GL_RENDERER, GL_VERSION, kind of context.
struct DriverStrings {
  std::string vendor;
  std::string renderer;
  std::string version;
  std::string context;
  gpusvc_driver_identity View() const {
    return gpusvc_driver_identity{sizeof(gpusvc_driver_identity), vendor.c_str(),
                                  renderer.c_str(), version.c_str(), context.c_str()};
  }
};

// The driver identity of a live context (any thread) into *out.
inline gpusvc_result ContextDriverStrings(const gpusvc_gl_context* ctx, DriverStrings* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_driver_identity id{};
  id.struct_size = sizeof(id);
  gpusvc_result r = gpusvc_gl_context_driver_identity(ctx, &id);
  if (r != GPUSVC_OK) return r;
  *out = DriverStrings{id.gl_vendor, id.gl_renderer, id.gl_version,
                      id.context != nullptr ? id.context : ""};
  return GPUSVC_OK;
}

// A program cache backed by a disk store (or memory only when !disk.enabled) into *out.
inline gpusvc_result NewProgramCacheWithDisk(const gpusvc_program_cache_config& config,
                                             const DiskOptions& disk,
                                             const DriverStrings& driver, ProgramCachePtr* out,
                                             gpusvc_program_cache_histogram_callback histogram = nullptr,
                                             void* user_data = nullptr) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  const gpusvc_program_cache_disk_config c = disk.View();
  const gpusvc_driver_identity d = driver.View();
  gpusvc_program_cache* raw = nullptr;
  gpusvc_result r = gpusvc_program_cache_open(&config, histogram, user_data, &c, &d, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Waits at most timeout_ms for the startup load; GPUSVC_PROGRAM_CACHE_LOAD_TIMEOUT on timeout.
inline gpusvc_result WaitUntilLoaded(const gpusvc_program_cache* cache, uint32_t timeout_ms,
                                     gpusvc_program_cache_disk_load_report* out) {
  if (out != nullptr) out->struct_size = sizeof(*out);
  return gpusvc_program_cache_wait_until_loaded(cache, timeout_ms, out);
}

// The disk store's first reported condition (empty when none or on error).
inline std::string DiskCondition(const gpusvc_program_cache* cache) {
  size_t len = 0;
  if (gpusvc_program_cache_disk_condition(cache, nullptr, 0, &len) != GPUSVC_OK)
    return std::string();
  std::vector<char> buf(len + 1);
  if (gpusvc_program_cache_disk_condition(cache, buf.data(), buf.size(), &len) != GPUSVC_OK)
    return std::string();
  return std::string(buf.data(), len);
}

// The default cache folder ($XDG_CACHE_HOME/gpusvc), empty on error.
inline std::string DefaultDiskDir() {
  size_t len = 0;
  if (gpusvc_program_cache_disk_config_default_dir(nullptr, 0, &len) != GPUSVC_OK) return std::string();
  std::vector<char> buf(len + 1);
  if (gpusvc_program_cache_disk_config_default_dir(buf.data(), buf.size(), &len) != GPUSVC_OK)
    return std::string();
  return std::string(buf.data(), len);
}

// ---- the persistence split: a sandboxed GPU process and the process that owns the disk ----

// What the stamp takes besides the driver (see gpusvc_program_cache_stamp_desc).
struct StampFields {
  std::string host_product;  // which embedder / browser channel
  std::string host_version;  // browser version + build, translator version
  bool has_driver_build_id = false;
  std::string driver_build_id;
  bool has_vendor_id = false;
  uint32_t vendor_id = 0;
  bool has_device_id = false;
  uint32_t device_id = 0;
};

// The stamp text both sides use (gpusvc_program_cache_stamp_text) into *out (left alone on
// error): the GPU process passes it to its persistence sink and sends it to the process that
// opens the store.
inline gpusvc_result StampText(const DriverStrings& driver, const StampFields& fields,
                               std::string* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  const gpusvc_driver_identity d = driver.View();
  gpusvc_program_cache_stamp_desc desc = Sized<gpusvc_program_cache_stamp_desc>();
  desc.host_product = fields.host_product.c_str();
  desc.host_version = fields.host_version.c_str();
  desc.driver_build_id = fields.has_driver_build_id ? fields.driver_build_id.c_str() : nullptr;
  desc.has_vendor_id = fields.has_vendor_id;
  desc.vendor_id = fields.vendor_id;
  desc.has_device_id = fields.has_device_id;
  desc.device_id = fields.device_id;
  size_t len = 0;
  gpusvc_result r = gpusvc_program_cache_stamp_text(&d, &desc, nullptr, 0, &len);
  if (r != GPUSVC_OK) return r;
  std::vector<char> buf(len + 1);
  r = gpusvc_program_cache_stamp_text(&d, &desc, buf.data(), buf.size(), &len);
  if (r == GPUSVC_OK) out->assign(buf.data(), len);
  return r;
}

// The GPU side's persistence sink in C++ terms: override what you forward (typically one IPC
// message each). Every method runs on the cache's persistence thread, one call at a time, and
// must not throw; none runs once the cache's ProgramCachePtr has been reset (even while program
// managers keep the cache), so the sink must outlive that reset.
class PersistSink {
 public:
  virtual ~PersistSink() = default;
  // A saved program: its key and whole entry (valid during the call), for StorePut.
  virtual void EntrySaved(const gpusvc_program_cache_sha1& key, const uint8_t* entry,
                          size_t len) = 0;
  // A cache hit (at most once per key per minute), for StoreTouch.
  virtual void EntryUsed(const gpusvc_program_cache_sha1& key) { (void)key; }
  // The driver refused an inserted entry's binary, for StoreRemove.
  virtual void EntryRejected(const gpusvc_program_cache_sha1& key) { (void)key; }
  // The driver refused too many inserted binaries in a row, for StoreClear.
  virtual void StoreRejected() {}
  // Shaders that compiled and that no saved entry records (valid during the call), for
  // StoreMarkCompiled; the next start hands them to InsertCompiled.
  virtual void ShadersCompiled(const gpusvc_program_cache_sha1* hashes, size_t count) {
    (void)hashes;
    (void)count;
  }

  // The C sink whose callbacks forward to this object; its stamp points into `stamp`, so both
  // must live until the cache is made.
  gpusvc_program_cache_persist_sink View(const std::string& stamp, bool compress = true,
                                         uint32_t max_consecutive_rejections = 3) {
    gpusvc_program_cache_persist_sink s = Sized<gpusvc_program_cache_persist_sink>();
    (void)gpusvc_program_cache_persist_sink_defaults(&s);
    s.user_data = this;
    s.entry_saved = &Saved;
    s.entry_used = &Used;
    s.entry_rejected = &Rejected;
    s.store_rejected = &AllRejected;
    s.shaders_compiled = &Compiled;
    s.stamp = stamp.data();
    s.stamp_len = stamp.size();
    s.compress = compress;
    s.max_consecutive_rejections = max_consecutive_rejections;
    return s;
  }

 private:
  static void Saved(void* self, const gpusvc_program_cache_sha1* key, const uint8_t* entry,
                    size_t len) noexcept {
    static_cast<PersistSink*>(self)->EntrySaved(*key, entry, len);
  }
  static void Used(void* self, const gpusvc_program_cache_sha1* key) noexcept {
    static_cast<PersistSink*>(self)->EntryUsed(*key);
  }
  static void Rejected(void* self, const gpusvc_program_cache_sha1* key) noexcept {
    static_cast<PersistSink*>(self)->EntryRejected(*key);
  }
  static void AllRejected(void* self) noexcept { static_cast<PersistSink*>(self)->StoreRejected(); }
  static void Compiled(void* self, const gpusvc_program_cache_sha1* hashes, size_t count) noexcept {
    static_cast<PersistSink*>(self)->ShadersCompiled(hashes, count);
  }
};

// A program cache whose saves also go to `sink` (config.persist_sink is set here) into *out.
inline gpusvc_result NewPersistingProgramCache(gpusvc_program_cache_config config,
                                               const std::string& stamp, PersistSink* sink,
                                               ProgramCachePtr* out,
                                               bool compress = true,
                                               uint32_t max_consecutive_rejections = 3) {
  if (out == nullptr || sink == nullptr) return GPUSVC_NULL_ARGUMENT;
  const gpusvc_program_cache_persist_sink s =
      sink->View(stamp, compress, max_consecutive_rejections);
  config.struct_size = sizeof(config);
  config.persist_sink = &s;
  gpusvc_program_cache* raw = nullptr;
  gpusvc_result r = gpusvc_program_cache_new(&config, nullptr, nullptr, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Validates an entry streamed back from the store and inserts it; its key into *key (may be
// null). GPUSVC_PROGRAM_CACHE_ENTRY_* / _NO_ROOM / _EMPTY_BINARY / _PERSIST_NOT_CONFIGURED.
inline gpusvc_result InsertEntry(const gpusvc_program_cache* cache, const uint8_t* entry,
                                 size_t len, gpusvc_program_cache_sha1* key = nullptr) {
  gpusvc_program_cache_sha1 k{};
  gpusvc_result r = gpusvc_program_cache_insert_entry(cache, entry, len, &k);
  if (r == GPUSVC_OK && key != nullptr) *key = k;
  return r;
}
inline gpusvc_result InsertEntry(const gpusvc_program_cache* cache,
                                 const std::vector<uint8_t>& entry,
                                 gpusvc_program_cache_sha1* key = nullptr) {
  return InsertEntry(cache, entry.data(), entry.size(), key);
}

// Marks shaders as known to compile (what StoreCompiledShaders gives back at startup).
inline gpusvc_result InsertCompiled(const gpusvc_program_cache* cache,
                                    const std::vector<gpusvc_program_cache_sha1>& hashes) {
  return gpusvc_program_cache_insert_compiled(cache, hashes.data(), hashes.size());
}

// The persistence counters into *out.
inline gpusvc_result PersistStats(const gpusvc_program_cache* cache,
                                  gpusvc_program_cache_persist_stats_snapshot* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_cache_persist_stats_snapshot s =
      Sized<gpusvc_program_cache_persist_stats_snapshot>();
  gpusvc_result r = gpusvc_program_cache_persist_stats(cache, &s);
  if (r == GPUSVC_OK) *out = s;
  return r;
}

// Deleter for gpusvc_program_cache_store (pending last uses are written first).
struct ProgramCacheStoreDeleter {
  void operator()(gpusvc_program_cache_store* s) const noexcept {
    (void)gpusvc_program_cache_store_free(s);
  }
};
// The disk store on its own (no GL, no cache); any thread.
using ProgramCacheStorePtr = std::unique_ptr<gpusvc_program_cache_store, ProgramCacheStoreDeleter>;

// A store's configuration in C++ terms; Defaults() matches
// gpusvc_program_cache_store_config_defaults.
struct StoreOptions {
  std::string dir;    // absolute, UTF-8
  std::string stamp;  // the GPU process's StampText
  uint64_t budget_bytes = 64u << 20;
  gpusvc_program_cache_disk_log_callback log = nullptr;  // the calling thread; must not throw
  void* log_user_data = nullptr;

  static StoreOptions Defaults() {
    StoreOptions o;
    gpusvc_program_cache_store_config c = Sized<gpusvc_program_cache_store_config>();
    if (gpusvc_program_cache_store_config_defaults(&c) == GPUSVC_OK) o.budget_bytes = c.budget_bytes;
    return o;
  }

  // The C view; valid while this object lives and is unchanged.
  gpusvc_program_cache_store_config View() const {
    gpusvc_program_cache_store_config c = Sized<gpusvc_program_cache_store_config>();
    c.dir = dir.data();
    c.dir_len = dir.size();
    c.stamp = stamp.data();
    c.stamp_len = stamp.size();
    c.budget_bytes = budget_bytes;
    c.log = log;
    c.log_user_data = log_user_data;
    return c;
  }
};

// Opens the store of options.stamp in options.dir into *out.
inline gpusvc_result OpenProgramCacheStore(const StoreOptions& options, ProgramCacheStorePtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  const gpusvc_program_cache_store_config c = options.View();
  gpusvc_program_cache_store* raw = nullptr;
  gpusvc_result r = gpusvc_program_cache_store_open(&c, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Checks and publishes an entry; its key into *key and whether it was written (false: one was
// there already) into *written (either may be null).
inline gpusvc_result StorePut(const gpusvc_program_cache_store* store, const uint8_t* entry,
                              size_t len, gpusvc_program_cache_sha1* key = nullptr,
                              bool* written = nullptr) {
  gpusvc_program_cache_sha1 k{};
  bool w = false;
  gpusvc_result r = gpusvc_program_cache_store_put(store, entry, len, &k, &w);
  if (r == GPUSVC_OK) {
    if (key != nullptr) *key = k;
    if (written != nullptr) *written = w;
  }
  return r;
}

// Records a use of `key` (coalesced).
inline gpusvc_result StoreTouch(const gpusvc_program_cache_store* store,
                                const gpusvc_program_cache_sha1& key) {
  return gpusvc_program_cache_store_touch(store, &key);
}

// Records shaders known to compile (what a sink's ShadersCompiled received).
inline gpusvc_result StoreMarkCompiled(const gpusvc_program_cache_store* store,
                                       const gpusvc_program_cache_sha1* hashes, size_t count) {
  return gpusvc_program_cache_store_mark_compiled(store, hashes, count);
}

// The shaders the store's compiled-shader list records, oldest first, into *out.
inline gpusvc_result StoreCompiledShaders(const gpusvc_program_cache_store* store,
                                          std::vector<gpusvc_program_cache_sha1>* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  for (;;) {
    size_t n = 0;
    gpusvc_result r = gpusvc_program_cache_store_compiled_shaders(store, nullptr, 0, &n);
    if (r != GPUSVC_OK) return r;
    std::vector<gpusvc_program_cache_sha1> v(n);
    r = gpusvc_program_cache_store_compiled_shaders(store, v.data(), v.size(), &n);
    if (r == GPUSVC_INSUFFICIENT_SIZE) continue;  // grew meanwhile (another process)
    if (r == GPUSVC_OK) {
      v.resize(n);
      *out = std::move(v);
    }
    return r;
  }
}

// Deletes the entry of `key`; whether there was one into *removed (may be null).
inline gpusvc_result StoreRemove(const gpusvc_program_cache_store* store,
                                 const gpusvc_program_cache_sha1& key, bool* removed = nullptr) {
  bool r_removed = false;
  gpusvc_result r = gpusvc_program_cache_store_remove(store, &key, &r_removed);
  if (r == GPUSVC_OK && removed != nullptr) *removed = r_removed;
  return r;
}

// Deletes every entry; how many into *removed (may be null).
inline gpusvc_result StoreClear(const gpusvc_program_cache_store* store, size_t* removed = nullptr) {
  size_t n = 0;
  gpusvc_result r = gpusvc_program_cache_store_clear(store, &n);
  if (r == GPUSVC_OK && removed != nullptr) *removed = n;
  return r;
}

// Calls fn(key, entry, len) for each entry, hot ones first, then the most recently used first,
// on this thread, while it returns true; the number of calls into *count (may be null). fn must
// not throw; it may call back into the store (no lock is held while it runs).
template <typename F>
inline gpusvc_result ForEachStoreEntry(const gpusvc_program_cache_store* store, F&& fn,
                                       size_t* count = nullptr) {
  using Fn = typename std::remove_reference<F>::type;
  struct Call {
    static int32_t Run(void* f, const gpusvc_program_cache_sha1* key, const uint8_t* entry,
                       size_t len) noexcept {
      return (*static_cast<Fn*>(f))(*key, entry, len) ? 0 : 1;
    }
  };
  size_t n = 0;
  gpusvc_result r = gpusvc_program_cache_store_for_each(
      store, &Call::Run, const_cast<void*>(static_cast<const void*>(std::addressof(fn))), &n);
  if (r == GPUSVC_OK && count != nullptr) *count = n;
  return r;
}

// The store's statistics into *out.
inline gpusvc_result StoreStats(const gpusvc_program_cache_store* store,
                                gpusvc_program_cache_store_stats_snapshot* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_cache_store_stats_snapshot s = Sized<gpusvc_program_cache_store_stats_snapshot>();
  gpusvc_result r = gpusvc_program_cache_store_stats(store, &s);
  if (r == GPUSVC_OK) *out = s;
  return r;
}

// The store's first reported condition (empty when none or on error).
inline std::string StoreCondition(const gpusvc_program_cache_store* store) {
  size_t len = 0;
  if (gpusvc_program_cache_store_condition(store, nullptr, 0, &len) != GPUSVC_OK) return std::string();
  std::vector<char> buf(len + 1);
  if (gpusvc_program_cache_store_condition(store, buf.data(), buf.size(), &len) != GPUSVC_OK)
    return std::string();
  return std::string(buf.data(), len);
}

// Writes the store's pending last-use records (StoreTouch) now.
inline gpusvc_result StoreFlush(const gpusvc_program_cache_store* store) {
  return gpusvc_program_cache_store_flush(store);
}

// ---- the compile/link flow ----

// A program manager over a headless GL context (on the context's thread).
inline gpusvc_result NewGlProgramManager(const gpusvc_gl_context* ctx,
                                         const gpusvc_program_cache* cache,
                                         const std::string& backend_identity,
                                         ProgramManagerPtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_manager* raw = nullptr;
  gpusvc_result r = gpusvc_program_manager_new_gl(ctx, cache, backend_identity.c_str(), &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Restoring a cache's stored programs ahead of the host's links, on a thread of its own with a
// context in the share group of the host's context (gpusvc_restore_ahead_start). Any thread may
// use or free it; freeing it releases it (the thread restores nothing more and deletes the
// programs nobody took), and the thread is joined when the last manager made with it goes.
struct RestoreAheadDeleter {
  void operator()(gpusvc_restore_ahead* p) const noexcept { (void)gpusvc_restore_ahead_free(p); }
};
using RestoreAheadPtr = std::unique_ptr<gpusvc_restore_ahead, RestoreAheadDeleter>;

// The defaults (1024 programs, 64 MiB of binaries, 10 s for the startup load).
inline gpusvc_restore_ahead_config RestoreAheadDefaults() {
  gpusvc_restore_ahead_config c = Sized<gpusvc_restore_ahead_config>();
  (void)gpusvc_restore_ahead_config_defaults(&c);
  return c;
}

// Starts a restore-ahead over `cache` with a context shared with `ctx` (on ctx's thread, as soon
// as the cache is open); `config` NULL: the defaults.
inline gpusvc_result StartRestoreAhead(const gpusvc_gl_context* ctx, const gpusvc_program_cache* cache,
                                       const gpusvc_restore_ahead_config* config,
                                       RestoreAheadPtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_restore_ahead* raw = nullptr;
  gpusvc_result r = gpusvc_restore_ahead_start(ctx, cache, config, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// What the restore-ahead did so far into *out (left alone on error).
inline gpusvc_result RestoreAheadStats(const gpusvc_restore_ahead* ahead,
                                      gpusvc_restore_ahead_stats_snapshot* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_restore_ahead_stats_snapshot s = Sized<gpusvc_restore_ahead_stats_snapshot>();
  gpusvc_result r = gpusvc_restore_ahead_stats(ahead, &s);
  if (r == GPUSVC_OK) *out = s;
  return r;
}

// A program manager over a headless GL context whose cache hits take the programs `ahead`
// restored (on the context's thread; `ahead` started from that context).
inline gpusvc_result NewGlProgramManagerRestoringAhead(const gpusvc_gl_context* ctx,
                                                       const gpusvc_program_cache* cache,
                                                       const gpusvc_restore_ahead* ahead,
                                                       const std::string& backend_identity,
                                                       ProgramManagerPtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_manager* raw = nullptr;
  gpusvc_result r =
      gpusvc_program_manager_new_gl_restore_ahead(ctx, cache, ahead, backend_identity.c_str(), &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// A program manager over the host's GL entry points.
inline gpusvc_result NewHostProgramManager(const gpusvc_program_manager_host_gl& gl,
                                           const gpusvc_program_cache* cache,
                                           const std::string& backend_identity,
                                           ProgramManagerPtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_manager* raw = nullptr;
  gpusvc_result r = gpusvc_program_manager_new_host(&gl, cache, backend_identity.c_str(), &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// A shader of `manager` (stage: GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*), not compiled yet.
inline gpusvc_result NewShader(const gpusvc_program_manager* manager, uint32_t stage,
                               const std::string& source, ShaderPtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_manager_shader* raw = nullptr;
  gpusvc_result r = gpusvc_program_manager_shader_new(manager, stage, source.data(), source.size(), &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Compiles through the cache; *outcome is a GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_* value.
inline gpusvc_result Compile(const gpusvc_program_manager* manager, const gpusvc_program_manager_shader* shader,
                             uint32_t* outcome) {
  return gpusvc_program_manager_compile(manager, shader, outcome);
}

// Replaces one list (GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_*) of a shader's variable maps.
inline gpusvc_result SetShaderVariableList(const gpusvc_program_manager_shader* shader, uint32_t kind,
                                           const std::vector<Variable>& list) {
  std::vector<gpusvc_program_cache_variable_info> c = ShaderVariablesView::Convert(list);
  return gpusvc_program_manager_shader_set_variable_list(shader, kind, c.empty() ? nullptr : c.data(),
                                                         c.size());
}

// Sets the translator's variable maps of a shader (varyings and outputs included).
inline gpusvc_result SetShaderVariables(const gpusvc_program_manager_shader* shader, const ShaderVariables& v) {
  ShaderVariablesView view(v);
  gpusvc_result r = gpusvc_program_manager_shader_set_variables(shader, &view.get());
  if (r == GPUSVC_OK && !v.varyings.empty())
    r = SetShaderVariableList(shader, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_VARYING, v.varyings);
  if (r == GPUSVC_OK && !v.outputs.empty())
    r = SetShaderVariableList(shader, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_OUTPUT, v.outputs);
  return r;
}

// The shader's variable maps (set by the host or restored by a cache hit).
inline gpusvc_result ReadShaderVariables(const gpusvc_program_manager_shader* shader, ShaderVariables* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  ShaderVariables v;
  const struct {
    uint32_t kind;
    std::vector<Variable>* list;
  } kinds[] = {{GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE, &v.attributes},
               {GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM, &v.uniforms},
               {GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_VARYING, &v.varyings},
               {GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_OUTPUT, &v.outputs}};
  for (const auto& k : kinds) {
    size_t n = 0;
    gpusvc_result r = gpusvc_program_manager_shader_variable_count(shader, k.kind, &n);
    if (r != GPUSVC_OK) return r;
    for (size_t i = 0; i < n; ++i) {
      gpusvc_program_cache_variable_info info{};
      if ((r = gpusvc_program_manager_shader_variable(shader, k.kind, i, &info)) != GPUSVC_OK) return r;
      k.list->push_back(ToVariable(info));
    }
  }
  *out = std::move(v);
  return GPUSVC_OK;
}

// The info log of a failed compile (empty otherwise or on error).
inline std::string ShaderInfoLog(const gpusvc_program_manager_shader* shader) {
  size_t len = 0;
  if (gpusvc_program_manager_shader_info_log(shader, nullptr, 0, &len) != GPUSVC_OK) return std::string();
  std::vector<char> buf(len + 1);
  if (gpusvc_program_manager_shader_info_log(shader, buf.data(), buf.size(), &len) != GPUSVC_OK)
    return std::string();
  return std::string(buf.data(), len);
}

// Links through the cache into *out.
inline gpusvc_result Link(const gpusvc_program_manager* manager, const gpusvc_program_manager_shader* vertex,
                          const gpusvc_program_manager_shader* fragment, const LinkOptions& options,
                          LinkedProgramPtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  LinkOptionsView view(options);
  gpusvc_program_manager_linked_program* raw = nullptr;
  gpusvc_result r = gpusvc_program_manager_link(manager, vertex, fragment, view.program(), &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// One active variable of a linked program: an attribute, uniform, transform-feedback varying
// or fragment output (location_index: GL_LOCATION_INDEX of an output, -1 otherwise).
struct ActiveVariable {
  std::string name;
  uint32_t gl_type = 0;
  int32_t size = 0;
  bool has_location = false;
  int32_t location = -1;
  int32_t location_index = -1;
  bool operator==(const ActiveVariable& o) const {
    return name == o.name && gl_type == o.gl_type && size == o.size &&
           has_location == o.has_location && (!has_location || location == o.location) &&
           location_index == o.location_index;
  }
  bool operator!=(const ActiveVariable& o) const { return !(*this == o); }
};

// The active variables of `kind` (GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_*), sorted by name.
inline gpusvc_result ReadActiveVariables(const gpusvc_program_manager_linked_program* p, uint32_t kind,
                                         std::vector<ActiveVariable>* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  size_t n = 0;
  gpusvc_result r = gpusvc_program_manager_linked_program_variable_count(p, kind, &n);
  if (r != GPUSVC_OK) return r;
  std::vector<ActiveVariable> list;
  for (size_t i = 0; i < n; ++i) {
    gpusvc_program_manager_active_variable v{};
    v.struct_size = sizeof(v);
    if ((r = gpusvc_program_manager_linked_program_variable(p, kind, i, &v)) != GPUSVC_OK) return r;
    list.push_back({v.name != nullptr ? v.name : "", v.gl_type, v.size, v.has_location,
                    v.location, v.location_index});
  }
  *out = std::move(list);
  return GPUSVC_OK;
}

// ---- issue 16: two-phase compile and link, every program kind, reflection ----

// Starts a compile without waiting (*outcome: ..._PENDING, or ..._DEFERRED / ..._KNOWN_FAILURE
// answered at once).
inline gpusvc_result StartCompile(const gpusvc_program_manager* manager,
                                  const gpusvc_program_manager_shader* shader, uint32_t* outcome) {
  return gpusvc_program_manager_start_compile(manager, shader, outcome);
}

// Whether a started compile has finished.
inline gpusvc_result CompileReady(const gpusvc_program_manager* manager,
                                  const gpusvc_program_manager_shader* shader, bool* ready) {
  return gpusvc_program_manager_compile_ready(manager, shader, ready);
}

// Ends a started compile (waiting when needed); *outcome as for Compile.
inline gpusvc_result FinishCompile(const gpusvc_program_manager* manager,
                                   const gpusvc_program_manager_shader* shader, uint32_t* outcome) {
  return gpusvc_program_manager_finish_compile(manager, shader, outcome);
}

// Links any program kind (shaders in any order) through the cache into *out.
inline gpusvc_result LinkProgram(const gpusvc_program_manager* manager,
                                 const std::vector<const gpusvc_program_manager_shader*>& shaders,
                                 const LinkOptions& options, LinkedProgramPtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  LinkOptionsView view(options);
  gpusvc_program_manager_linked_program* raw = nullptr;
  gpusvc_result r = gpusvc_program_manager_link_program(manager, shaders.data(), shaders.size(),
                                                        view.program(), &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Starts a link without waiting into *out (poll with LinkReady, end with FinishLink).
inline gpusvc_result StartLink(const gpusvc_program_manager* manager,
                               const std::vector<const gpusvc_program_manager_shader*>& shaders,
                               const LinkOptions& options, PendingLinkPtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  LinkOptionsView view(options);
  gpusvc_program_manager_pending_link* raw = nullptr;
  gpusvc_result r = gpusvc_program_manager_start_link(manager, shaders.data(), shaders.size(),
                                                      view.program(), &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Whether a started link has finished on the driver.
inline gpusvc_result LinkReady(const gpusvc_program_manager* manager, const PendingLinkPtr& pending,
                               bool* ready) {
  return gpusvc_program_manager_link_ready(manager, pending.get(), ready);
}

// Ends a started link into *out. The library consumes the pending link on success and on a
// link failure (the PendingLinkPtr is then released, empty); an argument error leaves it.
inline gpusvc_result FinishLink(const gpusvc_program_manager* manager, PendingLinkPtr* pending,
                                LinkedProgramPtr* out) {
  if (pending == nullptr || out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_manager_linked_program* raw = nullptr;
  gpusvc_result r = gpusvc_program_manager_finish_link(manager, pending->get(), &raw);
  if (r == GPUSVC_OK || r == GPUSVC_PROGRAM_CACHE_LINK_FAILED) (void)pending->release();
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// The stages of a linked program: bit (1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*) per stage.
inline uint32_t LinkedProgramStages(const gpusvc_program_manager_linked_program* p) {
  uint32_t mask = 0;
  (void)gpusvc_program_manager_linked_program_stages(p, &mask);
  return mask;
}

// GL_COMPUTE_WORK_GROUP_SIZE of a compute program.
inline gpusvc_result ComputeWorkGroupSize(const gpusvc_program_manager_linked_program* p,
                                          std::array<uint32_t, 3>* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  return gpusvc_program_manager_linked_program_compute_work_group_size(p, out->data());
}

// One member of a uniform or storage block.
struct BlockMember {
  std::string name;
  uint32_t gl_type = 0;
  int32_t array_size = 0;
  int32_t offset = 0;
  int32_t array_stride = 0;
  int32_t matrix_stride = 0;
  bool row_major = false;
  bool operator==(const BlockMember& o) const {
    return name == o.name && gl_type == o.gl_type && array_size == o.array_size && offset == o.offset &&
           array_stride == o.array_stride && matrix_stride == o.matrix_stride && row_major == o.row_major;
  }
  bool operator!=(const BlockMember& o) const { return !(*this == o); }
};

// A uniform or storage block of a linked program.
struct Block {
  std::string name;
  int32_t binding = 0;
  int32_t data_size = 0;
  uint32_t referenced_by = 0;
  std::vector<BlockMember> members;
  bool operator==(const Block& o) const {
    return name == o.name && binding == o.binding && data_size == o.data_size &&
           referenced_by == o.referenced_by && members == o.members;
  }
  bool operator!=(const Block& o) const { return !(*this == o); }
};

// The blocks of `kind` (GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_*), sorted by name.
inline gpusvc_result ReadBlocks(const gpusvc_program_manager_linked_program* p, uint32_t kind,
                                std::vector<Block>* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  size_t n = 0;
  gpusvc_result r = gpusvc_program_manager_linked_program_block_count(p, kind, &n);
  if (r != GPUSVC_OK) return r;
  std::vector<Block> list;
  for (size_t i = 0; i < n; ++i) {
    gpusvc_program_manager_block b = Sized<gpusvc_program_manager_block>();
    if ((r = gpusvc_program_manager_linked_program_block(p, kind, i, &b)) != GPUSVC_OK) return r;
    Block block{b.name != nullptr ? b.name : "", b.binding, b.data_size, b.referenced_by, {}};
    for (size_t j = 0; j < b.member_count; ++j) {
      gpusvc_program_manager_block_member m = Sized<gpusvc_program_manager_block_member>();
      if ((r = gpusvc_program_manager_linked_program_block_member(p, kind, i, j, &m)) != GPUSVC_OK) return r;
      block.members.push_back({m.name != nullptr ? m.name : "", m.gl_type, m.array_size, m.offset,
                               m.array_stride, m.matrix_stride, m.row_major});
    }
    list.push_back(std::move(block));
  }
  *out = std::move(list);
  return GPUSVC_OK;
}

// Defers program binary reads until SaveDeferredBinary (or not).
inline gpusvc_result SetDeferBinaryReads(const gpusvc_program_manager* manager, bool on) {
  return gpusvc_program_manager_set_defer_binary_reads(manager, on);
}

// Reads and saves a program's deferred binary; *saved says whether there was one.
inline gpusvc_result SaveDeferredBinary(const gpusvc_program_manager* manager,
                                        const gpusvc_program_manager_linked_program* p, bool* saved) {
  return gpusvc_program_manager_save_deferred_binary(manager, p, saved);
}

// Drops the deferred binary read of `p` (its binary will not be saved); whether there was one
// into *forgot (may be null). A program of another manager is GPUSVC_INVALID_ARGUMENT.
inline gpusvc_result ForgetDeferredBinary(const gpusvc_program_manager* manager,
                                          const gpusvc_program_manager_linked_program* p,
                                          bool* forgot = nullptr) {
  bool had = false;
  gpusvc_result r = gpusvc_program_manager_forget_deferred_binary(manager, p, &had);
  if (r == GPUSVC_OK && forgot != nullptr) *forgot = had;
  return r;
}

// How many linked programs of `manager` wait for their binary to be read, into *out.
inline gpusvc_result DeferredBinaries(const gpusvc_program_manager* manager, size_t* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  size_t n = 0;
  gpusvc_result r = gpusvc_program_manager_deferred_binaries(manager, &n);
  if (r == GPUSVC_OK) *out = n;
  return r;
}

// The bytes the programs waiting for their binary read hold, into *out.
inline gpusvc_result DeferredBytes(const gpusvc_program_manager* manager, size_t* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  size_t n = 0;
  gpusvc_result r = gpusvc_program_manager_deferred_bytes(manager, &n);
  if (r == GPUSVC_OK) *out = n;
  return r;
}

// ---- a linked program's identity ----

// The program's cache key into *out.
inline gpusvc_result LinkedProgramKey(const gpusvc_program_manager_linked_program* p,
                                      gpusvc_program_cache_sha1* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_cache_sha1 key{};
  gpusvc_result r = gpusvc_program_manager_linked_program_key(p, &key);
  if (r == GPUSVC_OK) *out = key;
  return r;
}

// The program object (its GL name, or the host's program id for a host manager) into *out.
inline gpusvc_result LinkedProgramObject(const gpusvc_program_manager_linked_program* p,
                                         uint64_t* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  uint64_t object = 0;
  gpusvc_result r = gpusvc_program_manager_linked_program_object(p, &object);
  if (r == GPUSVC_OK) *out = object;
  return r;
}

// How the program came about (GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_*) into *out.
inline gpusvc_result LinkedProgramOrigin(const gpusvc_program_manager_linked_program* p,
                                         uint32_t* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  uint32_t origin = 0;
  gpusvc_result r = gpusvc_program_manager_linked_program_origin(p, &origin);
  if (r == GPUSVC_OK) *out = origin;
  return r;
}

// Whether the program's binary still waits in the driver to be read (SaveDeferredBinary reads
// and saves it) into *out.
inline gpusvc_result LinkedProgramBinaryDeferred(const gpusvc_program_manager_linked_program* p,
                                                 bool* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  bool deferred = false;
  gpusvc_result r = gpusvc_program_manager_linked_program_binary_deferred(p, &deferred);
  if (r == GPUSVC_OK) *out = deferred;
  return r;
}

// The stages (bit 1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*) that statically use uniform `index`
// (in ReadActiveVariables(..._VARIABLE_KIND_UNIFORM) order) into *out; 0 when the driver does
// not say. An index past the end is GPUSVC_INVALID_ARGUMENT.
inline gpusvc_result UniformStaticUse(const gpusvc_program_manager_linked_program* p, size_t index,
                                      uint32_t* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  uint32_t stages = 0;
  gpusvc_result r = gpusvc_program_manager_linked_program_uniform_static_use(p, index, &stages);
  if (r == GPUSVC_OK) *out = stages;
  return r;
}

// UniformStaticUse of every uniform, in ReadActiveVariables(..._VARIABLE_KIND_UNIFORM) order.
inline gpusvc_result ReadUniformStaticUse(const gpusvc_program_manager_linked_program* p,
                                          std::vector<uint32_t>* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  size_t n = 0;
  gpusvc_result r = gpusvc_program_manager_linked_program_variable_count(
      p, GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM, &n);
  if (r != GPUSVC_OK) return r;
  std::vector<uint32_t> list(n);
  for (size_t i = 0; i < n; ++i) {
    if ((r = gpusvc_program_manager_linked_program_uniform_static_use(p, i, &list[i])) != GPUSVC_OK)
      return r;
  }
  *out = std::move(list);
  return GPUSVC_OK;
}

// ---- a shader of a program manager: source, options, state, translator maps ----

// Replaces the source (glShaderSource: non-empty UTF-8); the shader's hash changes once it is
// compiled again.
inline gpusvc_result SetShaderSource(const gpusvc_program_manager_shader* shader,
                                     const std::string& source) {
  return gpusvc_program_manager_shader_set_source(shader, source.data(), source.size());
}

// Sets the compile options that change the compiled output (opaque bytes, part of the shader
// hash as in ShaderHash's `options`).
inline gpusvc_result SetShaderCompileOptions(const gpusvc_program_manager_shader* shader,
                                             const std::string& options) {
  return gpusvc_program_manager_shader_set_compile_options(
      shader, options.empty() ? nullptr : reinterpret_cast<const uint8_t*>(options.data()),
      options.size());
}

// The shader's stage (GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*) into *out.
inline gpusvc_result ShaderStage(const gpusvc_program_manager_shader* shader, uint32_t* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  uint32_t stage = 0;
  gpusvc_result r = gpusvc_program_manager_shader_stage(shader, &stage);
  if (r == GPUSVC_OK) *out = stage;
  return r;
}

// The shader's state (GPUSVC_PROGRAM_MANAGER_SHADER_STATE_*) into *out.
inline gpusvc_result ShaderState(const gpusvc_program_manager_shader* shader, uint32_t* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  uint32_t state = 0;
  gpusvc_result r = gpusvc_program_manager_shader_state(shader, &state);
  if (r == GPUSVC_OK) *out = state;
  return r;
}

// GL_COMPILE_STATUS as the host reports it (true when compiled or deferred) into *out.
inline gpusvc_result ShaderCompileStatus(const gpusvc_program_manager_shader* shader, bool* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  bool ok = false;
  gpusvc_result r = gpusvc_program_manager_shader_compile_status(shader, &ok);
  if (r == GPUSVC_OK) *out = ok;
  return r;
}

// What a translator reports about a variable besides its Variable entry.
struct VariableQualifiers {
  uint32_t precision = 0;  // GL_LOW_FLOAT 0x8DF0 ... GL_HIGH_INT 0x8DF5; 0 when none
  bool static_use = false;
  bool operator==(const VariableQualifiers& o) const {
    return precision == o.precision && static_use == o.static_use;
  }
  bool operator!=(const VariableQualifiers& o) const { return !(*this == o); }
};

// Sets the qualifiers of variable `index` of `kind` (GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_*) in
// the shader's maps; an index past the end is GPUSVC_INVALID_ARGUMENT.
inline gpusvc_result SetShaderVariableQualifiers(const gpusvc_program_manager_shader* shader,
                                                 uint32_t kind, size_t index,
                                                 const VariableQualifiers& q) {
  gpusvc_program_manager_variable_qualifiers c =
      Sized<gpusvc_program_manager_variable_qualifiers>();
  c.precision = q.precision;
  c.static_use = q.static_use;
  return gpusvc_program_manager_shader_set_variable_qualifiers(shader, kind, index, &c);
}

// Sets the qualifiers of every variable of `kind`: list[i] for variable i. A list whose length is
// not the number of variables of `kind` is GPUSVC_INVALID_ARGUMENT, nothing set.
inline gpusvc_result SetShaderVariableQualifiers(const gpusvc_program_manager_shader* shader,
                                                 uint32_t kind,
                                                 const std::vector<VariableQualifiers>& list) {
  size_t n = 0;
  gpusvc_result r = gpusvc_program_manager_shader_variable_count(shader, kind, &n);
  if (r != GPUSVC_OK) return r;
  if (n != list.size()) return GPUSVC_INVALID_ARGUMENT;
  for (size_t i = 0; i < n; ++i) {
    if ((r = SetShaderVariableQualifiers(shader, kind, i, list[i])) != GPUSVC_OK) return r;
  }
  return GPUSVC_OK;
}

// The qualifiers of variable `index` of `kind` into *out (left alone on error).
inline gpusvc_result ShaderVariableQualifiers(const gpusvc_program_manager_shader* shader,
                                              uint32_t kind, size_t index,
                                              VariableQualifiers* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_manager_variable_qualifiers c =
      Sized<gpusvc_program_manager_variable_qualifiers>();
  gpusvc_result r = gpusvc_program_manager_shader_variable_qualifiers(shader, kind, index, &c);
  if (r == GPUSVC_OK) *out = VariableQualifiers{c.precision, c.static_use};
  return r;
}

// The qualifiers of every variable of `kind`, in the order of ReadShaderVariables' list.
inline gpusvc_result ReadShaderVariableQualifiers(const gpusvc_program_manager_shader* shader,
                                                  uint32_t kind,
                                                  std::vector<VariableQualifiers>* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  size_t n = 0;
  gpusvc_result r = gpusvc_program_manager_shader_variable_count(shader, kind, &n);
  if (r != GPUSVC_OK) return r;
  std::vector<VariableQualifiers> list(n);
  for (size_t i = 0; i < n; ++i) {
    if ((r = ShaderVariableQualifiers(shader, kind, i, &list[i])) != GPUSVC_OK) return r;
  }
  *out = std::move(list);
  return GPUSVC_OK;
}

// A uniform or storage block of a shader's variable maps, as a translator reports it (not a
// linked program's Block: names in the source and translated, members as Variable entries
// whose location is the member's byte offset).
struct ShaderBlock {
  std::string name;
  std::string mapped_name;
  int32_t binding = 0;
  int32_t data_size = 0;  // 0 when not known
  bool static_use = false;
  std::vector<Variable> members;
  bool operator==(const ShaderBlock& o) const {
    return name == o.name && mapped_name == o.mapped_name && binding == o.binding &&
           data_size == o.data_size && static_use == o.static_use && members == o.members;
  }
  bool operator!=(const ShaderBlock& o) const { return !(*this == o); }
};

// Replaces the blocks of `kind` (GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_*) of the shader's maps
// (copied; the other lists are kept). Stored with the program and restored on a cache hit.
inline gpusvc_result SetShaderBlocks(const gpusvc_program_manager_shader* shader, uint32_t kind,
                                     const std::vector<ShaderBlock>& blocks) {
  std::vector<std::vector<gpusvc_program_cache_variable_info>> members;
  members.reserve(blocks.size());
  std::vector<gpusvc_program_manager_shader_block_info> c;
  c.reserve(blocks.size());
  for (const ShaderBlock& b : blocks) {
    members.push_back(ShaderVariablesView::Convert(b.members));
    gpusvc_program_manager_shader_block_info info{};
    info.name = b.name.c_str();
    info.mapped_name = b.mapped_name.c_str();
    info.binding = b.binding;
    info.data_size = b.data_size;
    info.static_use = b.static_use;
    info.members = members.back().empty() ? nullptr : members.back().data();
    info.member_count = members.back().size();
    c.push_back(info);
  }
  return gpusvc_program_manager_shader_set_blocks(shader, kind, c.empty() ? nullptr : c.data(),
                                                  c.size());
}

// How many blocks of `kind` the shader's maps hold, into *out.
inline gpusvc_result ShaderBlockCount(const gpusvc_program_manager_shader* shader, uint32_t kind,
                                      size_t* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  size_t n = 0;
  gpusvc_result r = gpusvc_program_manager_shader_block_count(shader, kind, &n);
  if (r == GPUSVC_OK) *out = n;
  return r;
}

// Block `index` of `kind` of the shader's maps, members included, into *out; an index past the
// end is GPUSVC_INVALID_ARGUMENT (*out left alone).
inline gpusvc_result ReadShaderBlock(const gpusvc_program_manager_shader* shader, uint32_t kind,
                                     size_t index, ShaderBlock* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_program_manager_shader_block_info b{};
  gpusvc_result r = gpusvc_program_manager_shader_block(shader, kind, index, &b);
  if (r != GPUSVC_OK) return r;
  ShaderBlock block;
  block.name = b.name != nullptr ? b.name : "";
  block.mapped_name = b.mapped_name != nullptr ? b.mapped_name : "";
  block.binding = b.binding;
  block.data_size = b.data_size;
  block.static_use = b.static_use;
  for (size_t i = 0; i < b.member_count && b.members != nullptr; ++i)
    block.members.push_back(ToVariable(b.members[i]));
  *out = std::move(block);
  return GPUSVC_OK;
}

// Every block of `kind` of the shader's maps, in order (the mirror of SetShaderBlocks).
inline gpusvc_result ReadShaderBlocks(const gpusvc_program_manager_shader* shader, uint32_t kind,
                                      std::vector<ShaderBlock>* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  size_t n = 0;
  gpusvc_result r = ShaderBlockCount(shader, kind, &n);
  if (r != GPUSVC_OK) return r;
  std::vector<ShaderBlock> list(n);
  for (size_t i = 0; i < n; ++i) {
    if ((r = ReadShaderBlock(shader, kind, i, &list[i])) != GPUSVC_OK) return r;
  }
  *out = std::move(list);
  return GPUSVC_OK;
}

// ---- the host sink: what a host GL callback (gpusvc_program_manager_host_gl) hands back ----
//
// Call these only with the sink a callback was given, during that callback, on its thread (a
// sink kept past its callback is GPUSVC_INVALID_HANDLE). Names must be UTF-8 without a NUL (one
// with a NUL is GPUSVC_INVALID_ARGUMENT, nothing added).

namespace detail {
inline bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

inline gpusvc_program_manager_active_variable ActiveVariableView(const ActiveVariable& v) {
  gpusvc_program_manager_active_variable c = Sized<gpusvc_program_manager_active_variable>();
  c.name = v.name.c_str();
  c.gl_type = v.gl_type;
  c.size = v.size;
  c.has_location = v.has_location;
  c.location = v.location;
  c.location_index = v.location_index;
  return c;
}
}  // namespace detail

// Appends text (an info log, a reason; invalid UTF-8 is replaced).
inline gpusvc_result HostSinkWriteText(gpusvc_program_manager_host_sink* sink,
                                       const std::string& text) {
  return gpusvc_program_manager_host_sink_write_text(sink, text.data(), text.size());
}

// Appends bytes (a program binary).
inline gpusvc_result HostSinkWriteBytes(gpusvc_program_manager_host_sink* sink,
                                        const uint8_t* bytes, size_t len) {
  return gpusvc_program_manager_host_sink_write_bytes(sink, bytes, len);
}
inline gpusvc_result HostSinkWriteBytes(gpusvc_program_manager_host_sink* sink,
                                        const std::vector<uint8_t>& bytes) {
  return HostSinkWriteBytes(sink, bytes.empty() ? nullptr : bytes.data(), bytes.size());
}

// Adds an active attribute or uniform (active_attributes / active_uniforms); location_index is
// ignored.
inline gpusvc_result HostSinkPushVariable(gpusvc_program_manager_host_sink* sink,
                                          const ActiveVariable& v) {
  if (detail::HasNul(v.name)) return GPUSVC_INVALID_ARGUMENT;
  const gpusvc_program_manager_active_variable c = detail::ActiveVariableView(v);
  return gpusvc_program_manager_host_sink_push_variable(sink, &c);
}

// Adds a fragment output (program_interface): name, type, size, location, location_index.
inline gpusvc_result HostSinkPushOutput(gpusvc_program_manager_host_sink* sink,
                                        const ActiveVariable& v) {
  if (detail::HasNul(v.name)) return GPUSVC_INVALID_ARGUMENT;
  const gpusvc_program_manager_active_variable c = detail::ActiveVariableView(v);
  return gpusvc_program_manager_host_sink_push_output(sink, &c);
}

// Adds a transform-feedback varying, in link order (program_interface): name, type, size (the
// location fields are ignored).
inline gpusvc_result HostSinkPushVarying(gpusvc_program_manager_host_sink* sink,
                                         const ActiveVariable& v) {
  if (detail::HasNul(v.name)) return GPUSVC_INVALID_ARGUMENT;
  const gpusvc_program_manager_active_variable c = detail::ActiveVariableView(v);
  return gpusvc_program_manager_host_sink_push_varying(sink, &c);
}

// Adds a member to the last block of `kind` pushed (none yet: GPUSVC_INVALID_ARGUMENT).
inline gpusvc_result HostSinkPushBlockMember(gpusvc_program_manager_host_sink* sink, uint32_t kind,
                                             const BlockMember& m) {
  if (detail::HasNul(m.name)) return GPUSVC_INVALID_ARGUMENT;
  gpusvc_program_manager_block_member c = Sized<gpusvc_program_manager_block_member>();
  c.name = m.name.c_str();
  c.gl_type = m.gl_type;
  c.array_size = m.array_size;
  c.offset = m.offset;
  c.array_stride = m.array_stride;
  c.matrix_stride = m.matrix_stride;
  c.row_major = m.row_major;
  return gpusvc_program_manager_host_sink_push_block_member(sink, kind, &c);
}

// Adds a block of `kind` (GPUSVC_PROGRAM_MANAGER_BLOCK_KIND_*) and then each of its members, in
// order (program_interface); stops at the first error (a refused block adds nothing; a refused
// member leaves the block and the members before it).
inline gpusvc_result HostSinkPushBlock(gpusvc_program_manager_host_sink* sink, uint32_t kind,
                                       const Block& b) {
  if (detail::HasNul(b.name)) return GPUSVC_INVALID_ARGUMENT;
  gpusvc_program_manager_block c = Sized<gpusvc_program_manager_block>();
  c.name = b.name.c_str();
  c.binding = b.binding;
  c.data_size = b.data_size;
  c.referenced_by = b.referenced_by;
  gpusvc_result r = gpusvc_program_manager_host_sink_push_block(sink, kind, &c);
  for (size_t i = 0; r == GPUSVC_OK && i < b.members.size(); ++i)
    r = HostSinkPushBlockMember(sink, kind, b.members[i]);
  return r;
}

// Records the stages (bit 1 << GPUSVC_PROGRAM_CACHE_SHADER_STAGE_*) that statically use the
// uniform `name` (as pushed by active_uniforms) (program_interface).
inline gpusvc_result HostSinkSetUniformStaticUse(gpusvc_program_manager_host_sink* sink,
                                                 const std::string& name, uint32_t stages) {
  if (detail::HasNul(name)) return GPUSVC_INVALID_ARGUMENT;
  return gpusvc_program_manager_host_sink_set_uniform_static_use(sink, name.c_str(), stages);
}

// Records GL_COMPUTE_WORK_GROUP_SIZE (program_interface).
inline gpusvc_result HostSinkSetComputeWorkGroupSize(gpusvc_program_manager_host_sink* sink,
                                                     const std::array<uint32_t, 3>& size) {
  return gpusvc_program_manager_host_sink_set_compute_work_group_size(sink, size[0], size[1],
                                                                      size[2]);
}

// ---- sync points ----

// Deleter for gpusvc_sync_manager; freeing it ends every wait still pending (callbacks run) —
// once a scheduler made over it is freed too, when there is one (that scheduler keeps it).
struct SyncManagerDeleter {
  void operator()(gpusvc_sync_manager* p) const noexcept { (void)gpusvc_sync_manager_free(p); }
};
// Any thread.
using SyncManagerPtr = std::unique_ptr<gpusvc_sync_manager, SyncManagerDeleter>;

// Creates a sync manager into *out.
inline gpusvc_result NewSyncManager(SyncManagerPtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_sync_manager* raw = nullptr;
  gpusvc_result r = gpusvc_sync_manager_new(&raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// A token: command buffer (namespace_id, command_buffer_id) releasing release_count.
inline gpusvc_sync_token SyncToken(int8_t namespace_id, uint64_t command_buffer_id,
                                   uint64_t release_count, bool verified = false) {
  gpusvc_sync_token t{};
  t.namespace_id = namespace_id;
  t.command_buffer_id = command_buffer_id;
  t.release_count = release_count;
  t.verified = verified;
  return t;
}

// The unprocessed order numbers of a sequence into *out.
inline gpusvc_result SyncUnprocessed(const gpusvc_sync_manager* m, uint64_t sequence,
                                     std::vector<uint64_t>* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  size_t count = 0;
  gpusvc_result r = gpusvc_sync_sequence_unprocessed(m, sequence, nullptr, 0, &count);
  if (r != GPUSVC_OK) return r;
  std::vector<uint64_t> list(count);
  if (count > 0) {
    r = gpusvc_sync_sequence_unprocessed(m, sequence, list.data(), count, &count);
    if (r != GPUSVC_OK) return r;
  }
  list.resize(count);
  *out = std::move(list);
  return GPUSVC_OK;
}

// Keeps the highest release per client (gpusvc_sync_token_reduce) into *out.
inline gpusvc_result ReduceSyncTokens(const std::vector<gpusvc_sync_token>& tokens,
                                      std::vector<gpusvc_sync_token>* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  const gpusvc_sync_token* in = tokens.empty() ? nullptr : tokens.data();
  size_t count = 0;
  gpusvc_result r = gpusvc_sync_token_reduce(in, tokens.size(), nullptr, 0, &count);
  if (r != GPUSVC_OK) return r;
  std::vector<gpusvc_sync_token> list(count);
  if (count > 0) {
    r = gpusvc_sync_token_reduce(in, tokens.size(), list.data(), count, &count);
    if (r != GPUSVC_OK) return r;
  }
  list.resize(count);
  *out = std::move(list);
  return GPUSVC_OK;
}

// gpusvc_sync_token_wait with a C++ callable (copied in, owned by the wait): it runs exactly once
// when the wait ends (on the thread that ends it, possibly another) and is destroyed then; when
// the wait is not registered (*registered false, or an error) it never runs and is destroyed
// before this returns.
template <typename F>
inline gpusvc_result SyncWait(const gpusvc_sync_manager* m, const gpusvc_sync_token& token,
                              uint64_t waiting_sequence, uint64_t wait_order_num, F callback,
                              bool* registered) {
  if (registered == nullptr) return GPUSVC_NULL_ARGUMENT;
  F* boxed = new F(std::move(callback));
  void (*trampoline)(void*) = [](void* user_data) {
    F* f = static_cast<F*>(user_data);
    (*f)();
    delete f;
  };
  bool ok = false;
  gpusvc_result r =
      gpusvc_sync_token_wait(m, &token, waiting_sequence, wait_order_num, trampoline, boxed, &ok);
  if (r != GPUSVC_OK || !ok) delete boxed;
  if (r == GPUSVC_OK) *registered = ok;
  return r;
}

// Thin wrappers over the sync sequence and client calls (same codes, outputs written on OK).
inline gpusvc_result SyncSequenceCreate(const gpusvc_sync_manager* m, uint64_t* out_sequence) {
  return gpusvc_sync_sequence_create(m, out_sequence);
}
inline gpusvc_result SyncSequenceGenerate(const gpusvc_sync_manager* m, uint64_t sequence,
                                          uint64_t* out_order_num) {
  return gpusvc_sync_sequence_generate(m, sequence, out_order_num);
}
inline gpusvc_result SyncSequenceBegin(const gpusvc_sync_manager* m, uint64_t sequence,
                                       uint64_t order_num) {
  return gpusvc_sync_sequence_begin(m, sequence, order_num);
}
inline gpusvc_result SyncSequenceFinish(const gpusvc_sync_manager* m, uint64_t sequence,
                                        uint64_t order_num) {
  return gpusvc_sync_sequence_finish(m, sequence, order_num);
}
inline gpusvc_result SyncClientCreate(const gpusvc_sync_manager* m, int8_t namespace_id,
                                      uint64_t command_buffer_id, uint64_t sequence) {
  return gpusvc_sync_client_create(m, namespace_id, command_buffer_id, sequence);
}
// Releases release_count on a client; *released (may be null) says whether it moved.
inline gpusvc_result SyncClientRelease(const gpusvc_sync_manager* m, int8_t namespace_id,
                                       uint64_t command_buffer_id, uint64_t release_count,
                                       bool* released = nullptr) {
  bool moved = false;
  size_t callbacks = 0;
  gpusvc_result r =
      gpusvc_sync_client_release(m, namespace_id, command_buffer_id, release_count, &moved,
                                 &callbacks);
  if (r == GPUSVC_OK && released != nullptr) *released = moved;
  return r;
}

// ---- scheduler ----

// Deleter for gpusvc_scheduler; pending tasks are dropped without running (their callbacks and
// user data are never used again once it returns), and the clients made through it destroyed.
struct SchedulerDeleter {
  void operator()(gpusvc_scheduler* p) const noexcept { (void)gpusvc_scheduler_free(p); }
};
// Any thread; one thread at a time drives it (RunSchedulerNext / RunSchedulerUntilIdle).
using SchedulerPtr = std::unique_ptr<gpusvc_scheduler, SchedulerDeleter>;

// The defaults of gpusvc_scheduler_new_with_config (a zeroed config with its struct_size: 5 ms
// slices, 1 ms granularity, the system clock, no metrics callback).
inline gpusvc_scheduler_config SchedulerConfigDefaults() {
  return Sized<gpusvc_scheduler_config>();
}

// Creates a scheduler into *out; over `manager`'s sync points when non-null, else its own.
inline gpusvc_result NewScheduler(SchedulerPtr* out,
                                  const gpusvc_sync_manager* manager = nullptr) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_scheduler* raw = nullptr;
  gpusvc_result r = gpusvc_scheduler_new(manager, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Creates a scheduler with settings into *out (the config is read during the call; its
// callbacks and user data must outlive the scheduler).
inline gpusvc_result NewScheduler(const gpusvc_scheduler_config& config, SchedulerPtr* out,
                                  const gpusvc_sync_manager* manager = nullptr) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_scheduler* raw = nullptr;
  gpusvc_result r = gpusvc_scheduler_new_with_config(manager, &config, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Adds a stream of `priority` (a gpusvc_scheduler_priority value); its id into *out_stream.
inline gpusvc_result AddSchedulerStream(const gpusvc_scheduler* s, uint32_t priority,
                                        uint64_t* out_stream) {
  return gpusvc_scheduler_add_stream(s, priority, out_stream);
}

// Removes a stream (its tasks are dropped, the clients made on it with
// gpusvc_scheduler_create_client destroyed, its loan of priority ends); *out (may be null) says
// what it did.
inline gpusvc_result RemoveSchedulerStream(const gpusvc_scheduler* s, uint64_t stream,
                                           gpusvc_scheduler_removed_stream* out = nullptr) {
  gpusvc_scheduler_removed_stream removed = Sized<gpusvc_scheduler_removed_stream>();
  gpusvc_result r = gpusvc_scheduler_remove_stream(s, stream, &removed);
  if (r == GPUSVC_OK && out != nullptr) *out = removed;
  return r;
}

inline gpusvc_result SetSchedulerStreamEnabled(const gpusvc_scheduler* s, uint64_t stream,
                                               bool enabled) {
  return gpusvc_scheduler_set_enabled(s, stream, enabled);
}

inline gpusvc_result SetSchedulerStreamBasePriority(const gpusvc_scheduler* s, uint64_t stream,
                                                    uint32_t priority) {
  return gpusvc_scheduler_set_base_priority(s, stream, priority);
}

// The base priority (a gpusvc_scheduler_priority value) into *out.
inline gpusvc_result SchedulerStreamBasePriority(const gpusvc_scheduler* s, uint64_t stream,
                                                 uint32_t* out) {
  return gpusvc_scheduler_base_priority(s, stream, out);
}

// The scheduled priority (base, downgraded by slices, raised by inheritance) into *out.
inline gpusvc_result SchedulerStreamScheduledPriority(const gpusvc_scheduler* s, uint64_t stream,
                                                      uint32_t* out) {
  return gpusvc_scheduler_scheduled_priority(s, stream, out);
}

// The stream's sync-points sequence id into *out: clients created on it through the sync
// manager the scheduler was made over are released by this stream.
inline gpusvc_result SchedulerStreamSequence(const gpusvc_scheduler* s, uint64_t stream,
                                             uint64_t* out) {
  return gpusvc_scheduler_stream_sequence(s, stream, out);
}

// The number of pending tasks of a stream into *out.
inline gpusvc_result SchedulerStreamPendingTasks(const gpusvc_scheduler* s, uint64_t stream,
                                                 size_t* out) {
  return gpusvc_scheduler_pending_tasks(s, stream, out);
}

// A task of SchedulerEnqueue: C callbacks sharing one user_data. Without `destroy` the user
// data must stay valid (and usable from the driving thread) until the task runs to completion,
// its stream is removed or the scheduler freed; with it, the scheduler calls destroy(user_data)
// exactly once when it is done with the task (never when the enqueue fails).
struct SchedulerTask {
  gpusvc_scheduler_task_fn run = nullptr;
  gpusvc_scheduler_start_fn start = nullptr;      // may be null
  gpusvc_scheduler_destroy_fn destroy = nullptr;  // may be null
  void* user_data = nullptr;
  std::vector<gpusvc_sync_token> waits;  // tokens to wait for before the first start
};

// Enqueues a task at the back of `stream`; its order number into *out_order_num (may be null).
inline gpusvc_result SchedulerEnqueue(const gpusvc_scheduler* s, uint64_t stream,
                                      const SchedulerTask& task,
                                      uint64_t* out_order_num = nullptr) {
  gpusvc_scheduler_task t = Sized<gpusvc_scheduler_task>();
  t.run = task.run;
  t.start = task.start;
  t.destroy = task.destroy;
  t.user_data = task.user_data;
  t.waits = task.waits.empty() ? nullptr : task.waits.data();
  t.wait_count = task.waits.size();
  uint64_t order = 0;
  gpusvc_result r = gpusvc_scheduler_enqueue(s, stream, &t, &order);
  if (r == GPUSVC_OK && out_order_num != nullptr) *out_order_num = order;
  return r;
}

namespace detail {
template <typename F>
uint32_t RunCallable(void* ud) {
  return static_cast<uint32_t>((*static_cast<F*>(ud))());
}
template <typename F>
void DestroyCallable(void* ud) {
  delete static_cast<F*>(ud);
}
}  // namespace detail

// Enqueues a C++ callable returning a gpusvc_scheduler_task_result value (called again after
// GPUSVC_SCHEDULER_TASK_CONTINUE_LATER). The scheduler owns it: it is destroyed (with what it
// captured) on the thread that drops the task, once the task completed, or unrun when its
// stream is removed or the scheduler freed.
template <typename F>
inline gpusvc_result SchedulerEnqueueCallable(const gpusvc_scheduler* s, uint64_t stream, F f,
                                              std::vector<gpusvc_sync_token> waits = {},
                                              uint64_t* out_order_num = nullptr) {
  F* owned = new F(std::move(f));
  SchedulerTask t;
  t.run = &detail::RunCallable<F>;
  t.destroy = &detail::DestroyCallable<F>;
  t.user_data = owned;
  t.waits = std::move(waits);
  gpusvc_result r = SchedulerEnqueue(s, stream, t, out_order_num);
  if (r != GPUSVC_OK) delete owned;  // not taken: still ours
  return r;
}

// Runs the next stream's turn; the number of task runs into *out_ran (may be null).
inline gpusvc_result RunSchedulerNext(const gpusvc_scheduler* s, size_t* out_ran = nullptr) {
  size_t ran = 0;
  gpusvc_result r = gpusvc_scheduler_run_next(s, &ran);
  if (r == GPUSVC_OK && out_ran != nullptr) *out_ran = ran;
  return r;
}

// Runs until nothing is runnable; the number of task runs into *out_ran (may be null).
inline gpusvc_result RunSchedulerUntilIdle(const gpusvc_scheduler* s, size_t* out_ran = nullptr) {
  size_t ran = 0;
  gpusvc_result r = gpusvc_scheduler_run_until_idle(s, &ran);
  if (r == GPUSVC_OK && out_ran != nullptr) *out_ran = ran;
  return r;
}

// Whether the running task should yield (advisory) into *out.
inline gpusvc_result SchedulerShouldYield(const gpusvc_scheduler* s, bool* out) {
  return gpusvc_scheduler_should_yield(s, out);
}

// Creates the sync client (namespace_id, command_buffer_id) bound to `stream`.
inline gpusvc_result CreateSchedulerClient(const gpusvc_scheduler* s, uint64_t stream,
                                           int8_t namespace_id, uint64_t command_buffer_id) {
  return gpusvc_scheduler_create_client(s, stream, namespace_id, command_buffer_id);
}

// Releases release_count on a client, from a task of its stream.
inline gpusvc_result SchedulerRelease(const gpusvc_scheduler* s, int8_t namespace_id,
                                      uint64_t command_buffer_id, uint64_t release_count) {
  return gpusvc_scheduler_release(s, namespace_id, command_buffer_id, release_count);
}

// The metrics of `priority` (a gpusvc_scheduler_priority value) into *out (its struct_size is
// set here).
inline gpusvc_result SchedulerMetrics(const gpusvc_scheduler* s, uint32_t priority,
                                      gpusvc_scheduler_priority_metrics* out) {
  if (out != nullptr) out->struct_size = sizeof(*out);
  return gpusvc_scheduler_metrics(s, priority, out);
}

// The metrics of one live stream into *out (its struct_size is set here): tasks, waits and run
// time, and tasks and run time at each priority it ran at (indexed by gpusvc_scheduler_priority
// value). GPUSVC_SCHEDULER_UNKNOWN_STREAM once it is removed.
inline gpusvc_result SchedulerStreamMetrics(const gpusvc_scheduler* s, uint64_t stream,
                                            gpusvc_scheduler_stream_metrics_snapshot* out) {
  if (out != nullptr) out->struct_size = sizeof(*out);
  return gpusvc_scheduler_stream_metrics(s, stream, out);
}

// ---- bo-cache ----

// Deleter for gpusvc_bo_cache; objects still held by gpusvc::Bo values stay valid (the last one
// released frees the description).
struct BoCacheDeleter {
  void operator()(gpusvc_bo_cache* p) const noexcept { (void)gpusvc_bo_cache_free(p); }
};
// Any thread.
using BoCachePtr = std::unique_ptr<gpusvc_bo_cache, BoCacheDeleter>;

// Deleter for gpusvc_bo: releases one reference (the last closes the GEM handle, once).
struct BoDeleter {
  void operator()(gpusvc_bo* p) const noexcept { (void)gpusvc_bo_free(p); }
};
// One reference to a buffer object; any thread. A second reference is RefBo, never a copy (a
// reference can be refused, and a copy could not say so).
using Bo = std::unique_ptr<gpusvc_bo, BoDeleter>;

// Creates a memfd-backed cache (sealed memfds stand in for dma-bufs) into *out.
inline gpusvc_result NewMemfdBoCache(BoCachePtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_bo_cache* raw = nullptr;
  gpusvc_result r = gpusvc_bo_cache_new_memfd(&raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// The same with `config` (start from BoCacheConfigDefaults()).
inline gpusvc_result NewMemfdBoCache(const gpusvc_bo_cache_config& config, BoCachePtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_bo_cache* raw = nullptr;
  gpusvc_result r = gpusvc_bo_cache_new_memfd_with_config(&config, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Opens a cache on a new file description of the DRM render node at `path` (such as
// "/dev/dri/renderD128") into *out; `config` NULL means the defaults. A path that is not a
// render node is GPUSVC_BO_CACHE_NOT_A_DRM_DEVICE; *out is left alone on error.
inline gpusvc_result OpenBoCache(const char* path, const gpusvc_bo_cache_config* config,
                                 BoCachePtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_bo_cache* raw = nullptr;
  gpusvc_result r = gpusvc_bo_cache_open(path, config, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// The default cache configuration.
inline gpusvc_bo_cache_config BoCacheConfigDefaults() {
  gpusvc_bo_cache_config c{};
  c.struct_size = sizeof(c);
  (void)gpusvc_bo_cache_config_defaults(&c);
  return c;
}

// An import description: at least `min_size` bytes, exactly `exact_size` when non-zero.
inline gpusvc_bo_import_desc BoImportDesc(uint64_t min_size, uint64_t exact_size = 0,
                                          uint32_t flags = 0) {
  gpusvc_bo_import_desc d{};
  d.struct_size = sizeof(d);
  d.min_size = min_size;
  d.exact_size = exact_size;
  d.flags = flags;
  return d;
}

// Imports the dma-buf behind `fd` (borrowed) into *out.
inline gpusvc_result ImportBo(const gpusvc_bo_cache* cache, int32_t fd,
                              const gpusvc_bo_import_desc& desc, Bo* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_bo* raw = nullptr;
  gpusvc_result r = gpusvc_bo_cache_import(cache, fd, &desc, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// Imports planes; *out gets one Bo per plane, in order (planes of one buffer share its handle).
inline gpusvc_result ImportBoPlanes(const gpusvc_bo_cache* cache,
                                    const std::vector<gpusvc_bo_plane>& planes, uint32_t flags,
                                    std::vector<Bo>* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  // Every allocation happens before the call, so nothing can throw once it has handed out
  // references (emplace_back within the reserved capacity does not allocate).
  std::vector<gpusvc_bo*> raw(planes.size(), nullptr);
  std::vector<Bo> bos;
  bos.reserve(raw.size());
  gpusvc_result r = gpusvc_bo_cache_import_planes(
      cache, planes.empty() ? nullptr : planes.data(), planes.size(), flags,
      raw.empty() ? nullptr : raw.data());
  if (r != GPUSVC_OK) return r;
  for (gpusvc_bo* p : raw) bos.emplace_back(p);
  *out = std::move(bos);
  return GPUSVC_OK;
}

// One more reference to the object of `bo` into *out (whatever *out held is released). On error
// *out is left as it was: GPUSVC_BO_CACHE_TOO_MANY_REFERENCES when the object is at its cache's
// max_refs (nothing changed), GPUSVC_NULL_ARGUMENT or GPUSVC_INVALID_HANDLE for a bad `bo`.
inline gpusvc_result RefBo(const gpusvc_bo* bo, Bo* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_bo* raw = nullptr;
  gpusvc_result r = gpusvc_bo_ref(bo, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// ---- vertex-cache ----

// Parses a model's text form ("fifo:16", "seg:96/lru:32", "batch:16,32,0", ...) into *out;
// GPUSVC_VCACHE_BAD_MODEL for unknown or malformed text (*out left alone).
inline gpusvc_result ParseVcacheModel(const std::string& text, gpusvc_vcache_model* out) {
  if (text.find('\0') != std::string::npos) return GPUSVC_VCACHE_BAD_MODEL;
  return gpusvc_vcache_model_parse(text.c_str(), out);
}

// The text form of `model` into *out (left alone on error).
inline gpusvc_result VcacheModelText(const gpusvc_vcache_model& model, std::string* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  size_t len = 0;
  gpusvc_result r = gpusvc_vcache_model_text(&model, nullptr, 0, &len);
  if (r != GPUSVC_OK) return r;
  std::vector<char> buf(len + 1);
  r = gpusvc_vcache_model_text(&model, buf.data(), buf.size(), &len);
  if (r == GPUSVC_OK) out->assign(buf.data(), len);
  return r;
}

// Simulates a draw of `indices` (whole triangles over `vertex_count` vertices) under `model`:
// the analysis into *out and, when `per_vertex` is not null, each vertex's invocations into
// *per_vertex (vertex_count entries). Nothing is written on error.
inline gpusvc_result VcacheAnalyze(const gpusvc_vcache_model& model,
                                   const std::vector<uint32_t>& indices, uint32_t vertex_count,
                                   gpusvc_vcache_analysis* out,
                                   std::vector<uint32_t>* per_vertex = nullptr) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  std::vector<uint32_t> counts(per_vertex != nullptr ? vertex_count : 0);
  gpusvc_vcache_analysis a{};
  gpusvc_result r = gpusvc_vcache_analyze(&model, indices.empty() ? nullptr : indices.data(),
                                          indices.size(), vertex_count, &a,
                                          per_vertex != nullptr ? counts.data() : nullptr,
                                          counts.size());
  if (r != GPUSVC_OK) return r;
  *out = a;
  if (per_vertex != nullptr) *per_vertex = std::move(counts);
  return GPUSVC_OK;
}

// Reorders the triangles of `indices` for `model` (never worse under it than the input) into
// *out; nothing is written on error.
inline gpusvc_result VcacheOptimize(const gpusvc_vcache_model& model,
                                    const std::vector<uint32_t>& indices, uint32_t vertex_count,
                                    std::vector<uint32_t>* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  std::vector<uint32_t> ordered(indices.size());
  gpusvc_result r = gpusvc_vcache_optimize(
      &model, indices.empty() ? nullptr : indices.data(), indices.size(), vertex_count,
      ordered.empty() ? nullptr : ordered.data(), ordered.size());
  if (r == GPUSVC_OK) *out = std::move(ordered);
  return r;
}

// Draws `indices` twice on the driver of `ctx` (on the context's thread) with `options` (null:
// the defaults) and counts each vertex's invocations: the measurement into *out and, when
// `counts` is not null, the first draw's counts into *counts. Nothing is written on error.
inline gpusvc_result VcacheMeasure(const gpusvc_gl_context* ctx,
                                   const std::vector<uint32_t>& indices, uint32_t vertex_count,
                                   const gpusvc_vcache_draw_options* options,
                                   gpusvc_vcache_measurement* out,
                                   std::vector<uint32_t>* counts = nullptr) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  std::vector<uint32_t> c(counts != nullptr ? vertex_count : 0);
  gpusvc_vcache_measurement m{};
  m.struct_size = sizeof(m);
  gpusvc_result r = gpusvc_vcache_measure(ctx, indices.empty() ? nullptr : indices.data(),
                                          indices.size(), vertex_count, options, &m,
                                          counts != nullptr ? c.data() : nullptr, c.size());
  if (r != GPUSVC_OK) return r;
  *out = m;
  if (counts != nullptr) *counts = std::move(c);
  return GPUSVC_OK;
}

// Deleter for gpusvc_vcache_fit_result.
struct VcacheFitResultDeleter {
  void operator()(gpusvc_vcache_fit_result* p) const noexcept {
    (void)gpusvc_vcache_fit_result_free(p);
  }
};
// A fit's result; any thread (read-only).
using VcacheFitResultPtr = std::unique_ptr<gpusvc_vcache_fit_result, VcacheFitResultDeleter>;

// Measures the probe battery on the driver of `ctx` (on its thread) and fits the cache models to
// it into *out (left alone on error). `progress` (may be null) is called with `user_data` on this
// thread during the call.
inline gpusvc_result VcacheFit(const gpusvc_gl_context* ctx,
                               const gpusvc_vcache_fit_options* options,
                               gpusvc_vcache_fit_progress_fn progress, void* user_data,
                               VcacheFitResultPtr* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_vcache_fit_result* raw = nullptr;
  gpusvc_result r = gpusvc_vcache_fit(ctx, options, progress, user_data, &raw);
  if (r == GPUSVC_OK) out->reset(raw);
  return r;
}

// One entry of a fit result with its model's text.
struct VcacheFitEntry {
  gpusvc_vcache_fit_entry entry = Sized<gpusvc_vcache_fit_entry>();
  std::string model_text;
};

// Every entry of list `list` (GPUSVC_VCACHE_FIT_EXACT or GPUSVC_VCACHE_FIT_NEAR) into *out, in
// the result's order; *out is left alone on error.
inline gpusvc_result VcacheFitEntries(const gpusvc_vcache_fit_result* result, uint32_t list,
                                      std::vector<VcacheFitEntry>* out) {
  if (out == nullptr) return GPUSVC_NULL_ARGUMENT;
  gpusvc_vcache_fit_summary s{};
  s.struct_size = sizeof(s);
  gpusvc_result r = gpusvc_vcache_fit_result_summary(result, &s);
  if (r != GPUSVC_OK) return r;
  if (list != GPUSVC_VCACHE_FIT_EXACT && list != GPUSVC_VCACHE_FIT_NEAR) {
    return GPUSVC_INVALID_ARGUMENT;
  }
  const size_t n = list == GPUSVC_VCACHE_FIT_EXACT ? s.exact : s.near;
  std::vector<VcacheFitEntry> entries(n);
  for (size_t i = 0; i < n; ++i) {
    r = gpusvc_vcache_fit_result_entry(result, list, i, &entries[i].entry);
    if (r != GPUSVC_OK) return r;
    r = VcacheModelText(entries[i].entry.model, &entries[i].model_text);
    if (r != GPUSVC_OK) return r;
  }
  *out = std::move(entries);
  return GPUSVC_OK;
}

// ---- logging ----

// Receives the library's log events while it lives (gpusvc_set_log_callback): set on
// construction (check result(): GPUSVC_LOG_SUBSCRIBER_TAKEN in a process whose Rust code
// installed its own tracing subscriber first), unset on destruction. Once the destructor has
// returned the function is never called again (a call in flight on another thread is waited
// for). The function is called on any thread, one call at a time; it may call gpusvc (events it
// raises are dropped, not passed back to it) but must not construct or destroy a LogCallback.
// One is current per process: a newer LogCallback replaces an older one, whose destructor then
// leaves the newer one in place.
class LogCallback {
 public:
  // level: a gpusvc_log_level value; target: the part of the library that logged; message:
  // the event's text and its fields (at most GPUSVC_LOG_MAX_MESSAGE bytes). Both strings are
  // valid only during the call.
  using Fn = std::function<void(uint32_t level, const char* target, const char* message)>;

  LogCallback(uint32_t min_level, Fn fn) : fn_(std::move(fn)) {
    std::lock_guard<std::mutex> lock(Lock());
    result_ = gpusvc_set_log_callback(min_level, &LogCallback::Call, this);
    if (result_ == GPUSVC_OK) Current() = this;
  }
  ~LogCallback() {
    std::lock_guard<std::mutex> lock(Lock());
    if (Current() == this) {
      (void)gpusvc_set_log_callback(0, nullptr, nullptr);
      Current() = nullptr;
    }
  }
  LogCallback(const LogCallback&) = delete;
  LogCallback& operator=(const LogCallback&) = delete;

  gpusvc_result result() const { return result_; }

  // Events dropped so far because they were raised inside a host callback (process-wide).
  static uint64_t DroppedEvents() {
    uint64_t n = 0;
    (void)gpusvc_log_dropped_events(&n);
    return n;
  }

 private:
  static void Call(uint32_t level, const char* target, const char* message, void* user_data) {
    try {
      static_cast<LogCallback*>(user_data)->fn_(level, target, message);
    } catch (...) {
      // An exception must not unwind into the library.
    }
  }
  static std::mutex& Lock() {
    static std::mutex m;
    return m;
  }
  static LogCallback*& Current() {
    static LogCallback* current = nullptr;
    return current;
  }

  Fn fn_;
  gpusvc_result result_ = GPUSVC_OK;
};

}  // namespace gpusvc

// Digest equality (for tests and maps keyed by digest).
inline bool operator==(const gpusvc_program_cache_sha1& a, const gpusvc_program_cache_sha1& b) {
  return std::memcmp(a.bytes, b.bytes, sizeof a.bytes) == 0;
}
inline bool operator!=(const gpusvc_program_cache_sha1& a, const gpusvc_program_cache_sha1& b) { return !(a == b); }

// Token equality, field by field.
inline bool operator==(const gpusvc_sync_token& a, const gpusvc_sync_token& b) {
  return a.namespace_id == b.namespace_id && a.command_buffer_id == b.command_buffer_id &&
         a.release_count == b.release_count && a.verified == b.verified;
}
inline bool operator!=(const gpusvc_sync_token& a, const gpusvc_sync_token& b) {
  return !(a == b);
}

#endif  // GPUSVC_HPP
