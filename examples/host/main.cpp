// examples/host: a GPU-process host as a browser or an engine would write it, on libgpusvc.
//
//  * It brings its own GL: an EGL context on Mesa's surfaceless platform (llvmpipe without a
//    GPU; EGL_MESA_platform_surfaceless, falling back to the default display), OpenGL ES 3.0 as
//    a browser's ANGLE would give, drawing into its own framebuffer object.
//  * Programs go through gpusvc's program cache with the program manager over the host's GL
//    callbacks (gpusvc_program_manager_new_host): the host compiles, links, reads and loads
//    program binaries with its own GL calls; gpusvc decides what is a cache hit.
//  * Work runs on gpusvc's scheduler: a low-priority "raster" stream links and draws, then
//    releases a sync token; a high-priority "display" stream waits on that token before it
//    reads the pixels back. The display task outranks the raster task and still runs second.
//
//  * The persistence split of a sandboxed GPU process: the GPU side's cache has a persistence
//    sink and never opens a file; what it saves goes over a channel (standing in for the IPC to
//    the browser process) to the browser side, which owns the disk store (no GL, no cache) and
//    streams every entry back when the GPU process starts again.
//
// Three rounds of three programs: round 1 compiles and links from source (3 links); round 2 (a
// second program manager over the same cache, as a second renderer would be) gets every program
// from memory (3 hits, restored with glProgramBinary); then the browser persists what the sink
// sent, the GPU process "restarts" (a new, empty cache), the browser streams the store back into
// it, and round 3 gets every program as a cache hit again, with no compile and no link. Every
// drawn pixel is checked. Exit status 0 only when every check held; the last line sums up.
//
// Everything runs on the main thread: the EGL context is current there, and program managers,
// shaders and linked programs are bound to the thread that made them (see README's threading
// table). The scheduler is driven from the same thread, so its tasks may use GL.
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLES3/gl3.h>

#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "gpusvc.hpp"

namespace {

int g_failures = 0;

// Records a failed check with what was expected; the run goes on so that one report shows all.
bool Check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++g_failures;
  }
  return ok;
}

bool CheckOk(gpusvc_result r, const std::string& what) {
  return Check(r == GPUSVC_OK, what + ": " + gpusvc::ResultMessage(r) + " (" +
                                   gpusvc::LastErrorDetail() + ")");
}

// ---- the host's own EGL context ----

class EglContext {
 public:
  bool Open() {
    auto get_platform_display = reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(
        eglGetProcAddress("eglGetPlatformDisplayEXT"));
    const char* client_exts = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (get_platform_display != nullptr && client_exts != nullptr &&
        std::strstr(client_exts, "EGL_MESA_platform_surfaceless") != nullptr) {
      display_ = get_platform_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
    } else {
      display_ = eglGetDisplay(EGL_DEFAULT_DISPLAY);
    }
    EGLint major = 0, minor = 0;
    if (display_ == EGL_NO_DISPLAY || !eglInitialize(display_, &major, &minor)) {
      std::fprintf(stderr, "no EGL display (0x%x)\n", eglGetError());
      return false;
    }
    const EGLint config_attribs[] = {EGL_RENDERABLE_TYPE, EGL_OPENGL_ES3_BIT, EGL_SURFACE_TYPE,
                                     EGL_PBUFFER_BIT, EGL_NONE};
    EGLConfig config = nullptr;
    EGLint n = 0;
    if (!eglBindAPI(EGL_OPENGL_ES_API) ||
        !eglChooseConfig(display_, config_attribs, &config, 1, &n) || n != 1) {
      std::fprintf(stderr, "no OpenGL ES 3 config (0x%x)\n", eglGetError());
      return false;
    }
    const EGLint context_attribs[] = {EGL_CONTEXT_MAJOR_VERSION, 3, EGL_CONTEXT_MINOR_VERSION, 0,
                                      EGL_NONE};
    context_ = eglCreateContext(display_, config, EGL_NO_CONTEXT, context_attribs);
    if (context_ == EGL_NO_CONTEXT ||
        !eglMakeCurrent(display_, EGL_NO_SURFACE, EGL_NO_SURFACE, context_)) {
      std::fprintf(stderr, "no current OpenGL ES 3 context (0x%x)\n", eglGetError());
      return false;
    }
    std::printf("EGL %d.%d, %s, %s\n", major, minor, glGetString(GL_RENDERER),
                glGetString(GL_VERSION));
    return true;
  }

  // Releases and destroys the context. The display stays initialized until the process exits,
  // as in most hosts: on Mesa 22.3 llvmpipe, eglTerminate after a draw leaves two 56-byte
  // blocks behind (a cycle LeakSanitizer reports); without it nothing leaks.
  ~EglContext() {
    if (context_ != EGL_NO_CONTEXT) {
      eglMakeCurrent(display_, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
      eglDestroyContext(display_, context_);
    }
    eglReleaseThread();
  }

 private:
  EGLDisplay display_ = EGL_NO_DISPLAY;
  EGLContext context_ = EGL_NO_CONTEXT;
};

// ---- the host's GL behind gpusvc_program_manager_host_gl ----

// What the host's GL was asked to do, by gpusvc.
struct GlCounts {
  int compiles = 0, links = 0, binaries_read = 0, binaries_loaded = 0, binaries_refused = 0;
  int shaders_deleted = 0, programs_deleted = 0;
};

class HostGl {
 public:
  GlCounts counts;

  gpusvc_program_manager_host_gl Callbacks() {
    gpusvc_program_manager_host_gl gl{};
    gl.struct_size = sizeof gl;
    gl.user_data = this;
    gl.compile = &Compile;
    gl.link = &Link;
    gl.program_binary = &ProgramBinary;
    gl.load_binary = &LoadBinary;
    gl.active_attributes = &ActiveAttributes;
    gl.active_uniforms = &ActiveUniforms;
    gl.delete_shader = &DeleteShader;
    gl.delete_program = &DeleteProgram;
    return gl;
  }

 private:
  static HostGl* Self(void* user_data) { return static_cast<HostGl*>(user_data); }

  static void Log(gpusvc_program_manager_host_sink* sink, const std::string& text) {
    (void)gpusvc_program_manager_host_sink_write_text(sink, text.data(), text.size());
  }

  static std::string ShaderLog(GLuint shader) {
    GLint len = 0;
    glGetShaderiv(shader, GL_INFO_LOG_LENGTH, &len);
    std::string log(size_t(len > 0 ? len : 1), '\0');
    glGetShaderInfoLog(shader, GLsizei(log.size()), nullptr, &log[0]);
    return log.c_str();
  }

  static std::string ProgramLog(GLuint program) {
    GLint len = 0;
    glGetProgramiv(program, GL_INFO_LOG_LENGTH, &len);
    std::string log(size_t(len > 0 ? len : 1), '\0');
    glGetProgramInfoLog(program, GLsizei(log.size()), nullptr, &log[0]);
    return log.c_str();
  }

  static bool Compile(void* user_data, uint32_t stage, const char* source, size_t len,
                      uint64_t* out_shader, gpusvc_program_manager_host_sink* log) {
    ++Self(user_data)->counts.compiles;
    GLenum type = stage == GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX ? GL_VERTEX_SHADER
                                                                     : GL_FRAGMENT_SHADER;
    GLuint shader = glCreateShader(type);
    const GLchar* text = source;
    GLint length = GLint(len);
    glShaderSource(shader, 1, &text, &length);
    glCompileShader(shader);
    GLint ok = GL_FALSE;
    glGetShaderiv(shader, GL_COMPILE_STATUS, &ok);
    if (ok != GL_TRUE) {
      Log(log, ShaderLog(shader));
      glDeleteShader(shader);
      return false;
    }
    *out_shader = shader;
    return true;
  }

  static bool Link(void* user_data, uint64_t vs, uint64_t fs,
                   const gpusvc_program_cache_link_options* options, uint64_t* out_program,
                   gpusvc_program_manager_host_sink* log) {
    ++Self(user_data)->counts.links;
    GLuint program = glCreateProgram();
    glAttachShader(program, GLuint(vs));
    glAttachShader(program, GLuint(fs));
    for (size_t i = 0; i < options->attribute_binding_count; ++i) {
      glBindAttribLocation(program, options->attribute_bindings[i].location,
                           options->attribute_bindings[i].name);
    }
    if (options->transform_feedback_varying_count > 0) {
      glTransformFeedbackVaryings(
          program, GLsizei(options->transform_feedback_varying_count),
          options->transform_feedback_varyings,
          options->transform_feedback_mode == GPUSVC_PROGRAM_CACHE_TRANSFORM_FEEDBACK_SEPARATE
              ? GL_SEPARATE_ATTRIBS
              : GL_INTERLEAVED_ATTRIBS);
    }
    glProgramParameteri(program, GL_PROGRAM_BINARY_RETRIEVABLE_HINT, GL_TRUE);
    glLinkProgram(program);
    glDetachShader(program, GLuint(vs));
    glDetachShader(program, GLuint(fs));
    GLint ok = GL_FALSE;
    glGetProgramiv(program, GL_LINK_STATUS, &ok);
    if (ok != GL_TRUE) {
      Log(log, ProgramLog(program));
      glDeleteProgram(program);
      return false;
    }
    *out_program = program;
    return true;
  }

  static bool ProgramBinary(void* user_data, uint64_t program, uint32_t* out_format,
                            gpusvc_program_manager_host_sink* out) {
    ++Self(user_data)->counts.binaries_read;
    GLint len = 0;
    glGetProgramiv(GLuint(program), GL_PROGRAM_BINARY_LENGTH, &len);
    if (len <= 0) {
      Log(out, "GL_PROGRAM_BINARY_LENGTH is 0 (no binary formats?)");
      return false;
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(len));
    GLenum format = 0;
    GLsizei written = 0;
    glGetProgramBinary(GLuint(program), len, &written, &format, bytes.data());
    if (glGetError() != GL_NO_ERROR || written <= 0) {
      Log(out, "glGetProgramBinary failed");
      return false;
    }
    *out_format = format;
    return gpusvc_program_manager_host_sink_write_bytes(out, bytes.data(), size_t(written)) ==
           GPUSVC_OK;
  }

  static bool LoadBinary(void* user_data, uint32_t format, const uint8_t* bytes, size_t len,
                         uint64_t* out_program, gpusvc_program_manager_host_sink* log) {
    HostGl* self = Self(user_data);
    ++self->counts.binaries_loaded;
    GLuint program = glCreateProgram();
    glProgramBinary(program, format, bytes, GLsizei(len));
    GLint ok = GL_FALSE;
    glGetProgramiv(program, GL_LINK_STATUS, &ok);
    if (glGetError() != GL_NO_ERROR || ok != GL_TRUE) {
      ++self->counts.binaries_refused;
      Log(log, "glProgramBinary: GL_LINK_STATUS false");
      glDeleteProgram(program);
      return false;
    }
    *out_program = program;
    return true;
  }

  // Pushes each active attribute (attributes = true) or uniform with its location.
  static void PushActive(uint64_t id, bool attributes, gpusvc_program_manager_host_sink* out) {
    GLuint program = GLuint(id);
    GLint count = 0, max_len = 0;
    glGetProgramiv(program, attributes ? GL_ACTIVE_ATTRIBUTES : GL_ACTIVE_UNIFORMS, &count);
    glGetProgramiv(program,
                   attributes ? GL_ACTIVE_ATTRIBUTE_MAX_LENGTH : GL_ACTIVE_UNIFORM_MAX_LENGTH,
                   &max_len);
    std::vector<char> name(size_t(max_len > 0 ? max_len : 1) + 1);
    for (GLint i = 0; i < count; ++i) {
      GLsizei len = 0;
      GLint size = 0;
      GLenum type = 0;
      if (attributes) {
        glGetActiveAttrib(program, GLuint(i), GLsizei(name.size()), &len, &size, &type, name.data());
      } else {
        glGetActiveUniform(program, GLuint(i), GLsizei(name.size()), &len, &size, &type, name.data());
      }
      gpusvc_program_manager_active_variable v{};
      v.struct_size = sizeof v;
      v.name = name.data();
      v.gl_type = type;
      v.size = size;
      v.location = attributes ? glGetAttribLocation(program, name.data())
                              : glGetUniformLocation(program, name.data());
      v.has_location = v.location >= 0;
      (void)gpusvc_program_manager_host_sink_push_variable(out, &v);
    }
  }

  static void ActiveAttributes(void*, uint64_t program, gpusvc_program_manager_host_sink* out) {
    PushActive(program, true, out);
  }
  static void ActiveUniforms(void*, uint64_t program, gpusvc_program_manager_host_sink* out) {
    PushActive(program, false, out);
  }
  static void DeleteShader(void* user_data, uint64_t shader) {
    ++Self(user_data)->counts.shaders_deleted;
    glDeleteShader(GLuint(shader));
  }
  static void DeleteProgram(void* user_data, uint64_t program) {
    ++Self(user_data)->counts.programs_deleted;
    glDeleteProgram(GLuint(program));
  }
};

// ---- the persistence split ----

// One message of the GPU process to the browser process about its cache.
struct Message {
  enum Kind { kSaved, kUsed, kRejected, kStoreRejected } kind;
  gpusvc_program_cache_sha1 key;
  std::vector<uint8_t> entry;  // kSaved: the whole self-validating entry
};

// Stands in for the IPC channel between the two processes.
class Channel {
 public:
  void Send(Message m) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(m));
  }
  std::vector<Message> Drain() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::move(queue_);
  }

 private:
  std::mutex mutex_;
  std::vector<Message> queue_;
};

// GPU side: the cache's persistence sink (called on the cache's persistence thread) forwards
// everything to the browser.
class SinkToBrowser : public gpusvc::PersistSink {
 public:
  explicit SinkToBrowser(Channel* channel) : channel_(channel) {}
  std::atomic<int> sent{0};

  void EntrySaved(const gpusvc_program_cache_sha1& key, const uint8_t* entry,
                  size_t len) override {
    ++sent;
    channel_->Send({Message::kSaved, key, std::vector<uint8_t>(entry, entry + len)});
  }
  void EntryUsed(const gpusvc_program_cache_sha1& key) override {
    channel_->Send({Message::kUsed, key, {}});
  }
  void EntryRejected(const gpusvc_program_cache_sha1& key) override {
    channel_->Send({Message::kRejected, key, {}});
  }
  void StoreRejected() override { channel_->Send({Message::kStoreRejected, {}, {}}); }

 private:
  Channel* channel_;
};

// Browser side: what it did with the messages.
struct BrowserCounts {
  int persisted = 0, already_there = 0, touched = 0, removed = 0, cleared = 0;
};

// Browser side: applies the GPU process's messages to its store.
void BrowserReceive(const gpusvc_program_cache_store* store, Channel& channel,
                    BrowserCounts* counts) {
  for (const Message& m : channel.Drain()) {
    switch (m.kind) {
      case Message::kSaved: {
        bool written = false;
        if (CheckOk(gpusvc::StorePut(store, m.entry.data(), m.entry.size(), nullptr, &written),
                    "store put")) {
          (written ? counts->persisted : counts->already_there) += 1;
        }
        break;
      }
      case Message::kUsed:
        counts->touched += CheckOk(gpusvc::StoreTouch(store, m.key), "store touch");
        break;
      case Message::kRejected:
        counts->removed += CheckOk(gpusvc::StoreRemove(store, m.key), "store remove");
        break;
      case Message::kStoreRejected:
        counts->cleared += CheckOk(gpusvc::StoreClear(store), "store clear");
        break;
    }
  }
}

// ---- what is drawn ----

constexpr int kPrograms = 3;
constexpr GLuint kPositionLocation = 3;  // bound through the link options (part of the key)

const char kVertexShader[] =
    "#version 300 es\n"
    "in vec2 a_position;\n"
    "void main() { gl_Position = vec4(a_position, 0.0, 1.0); }\n";

// Program i multiplies u_color by its own constant; pixel i of the target is drawn with it.
const float kConstants[kPrograms][4] = {{1.0f, 0.5f, 0.0f, 1.0f},
                                        {0.0f, 1.0f, 0.5f, 1.0f},
                                        {0.5f, 0.0f, 1.0f, 1.0f}};
const float kColor[4] = {1.0f, 1.0f, 1.0f, 1.0f};

std::string FragmentShader(int i) {
  char constant[96];
  std::snprintf(constant, sizeof constant, "vec4(%.2f, %.2f, %.2f, %.2f)", kConstants[i][0],
                kConstants[i][1], kConstants[i][2], kConstants[i][3]);
  return std::string("#version 300 es\n"
                     "precision mediump float;\n"
                     "uniform vec4 u_color;\n"
                     "out vec4 o_color;\n"
                     "void main() { o_color = u_color * ") +
         constant + "; }\n";
}

// A kPrograms x 1 RGBA8 target and a triangle covering it.
class Target {
 public:
  Target() {
    glGenRenderbuffers(1, &rb_);
    glBindRenderbuffer(GL_RENDERBUFFER, rb_);
    glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, kPrograms, 1);
    glGenFramebuffers(1, &fb_);
    glBindFramebuffer(GL_FRAMEBUFFER, fb_);
    glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, rb_);
    const float triangle[] = {-1.0f, -1.0f, 3.0f, -1.0f, -1.0f, 3.0f};
    glGenVertexArrays(1, &vao_);
    glBindVertexArray(vao_);
    glGenBuffers(1, &vbo_);
    glBindBuffer(GL_ARRAY_BUFFER, vbo_);
    glBufferData(GL_ARRAY_BUFFER, sizeof triangle, triangle, GL_STATIC_DRAW);
    glVertexAttribPointer(kPositionLocation, 2, GL_FLOAT, GL_FALSE, 0, nullptr);
    glEnableVertexAttribArray(kPositionLocation);
  }
  ~Target() {
    glDeleteBuffers(1, &vbo_);
    glDeleteVertexArrays(1, &vao_);
    glDeleteFramebuffers(1, &fb_);
    glDeleteRenderbuffers(1, &rb_);
  }
  bool Complete() const {
    return glCheckFramebufferStatus(GL_FRAMEBUFFER) == GL_FRAMEBUFFER_COMPLETE;
  }
  void Clear() const {
    glViewport(0, 0, kPrograms, 1);
    glClearColor(0, 0, 0, 0);
    glClear(GL_COLOR_BUFFER_BIT);
  }
  // Draws pixel i with `program`, u_color at `color_location`.
  void Draw(int i, GLuint program, GLint color_location) const {
    glViewport(i, 0, 1, 1);
    glUseProgram(program);
    glUniform4fv(color_location, 1, kColor);
    glDrawArrays(GL_TRIANGLES, 0, 3);
    glUseProgram(0);
  }
  std::vector<uint8_t> Read() const {
    std::vector<uint8_t> px(4 * kPrograms);
    glReadPixels(0, 0, kPrograms, 1, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
    return px;
  }

 private:
  GLuint rb_ = 0, fb_ = 0, vao_ = 0, vbo_ = 0;
};

// ---- one round: link (through the cache) and draw on "raster", check on "display" ----

struct RoundResult {
  int linked = 0, hits = 0, relinked = 0, deferred_compiles = 0, pixels_ok = 0;
  std::vector<std::string> order;  // which task ran when
};

struct Round {
  const char* name = "";
  const gpusvc_program_manager* manager = nullptr;
  const gpusvc_scheduler* scheduler = nullptr;
  const Target* target = nullptr;
  uint64_t raster_client = 0;
  uint64_t release_count = 0;
  RoundResult result;
};

// The raster task: compiles, links and draws every program, then releases the sync token the
// display task waits on.
gpusvc_scheduler_task_result RasterTask(Round* round) {
  round->result.order.push_back("raster");
  round->target->Clear();
  gpusvc::LinkOptions options;
  options.attribute_bindings = {{"a_position", kPositionLocation}};
  for (int i = 0; i < kPrograms; ++i) {
    gpusvc::ShaderPtr vs, fs;
    if (!CheckOk(gpusvc::NewShader(round->manager, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
                                   kVertexShader, &vs), "new vertex shader") ||
        !CheckOk(gpusvc::NewShader(round->manager, GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT,
                                   FragmentShader(i), &fs), "new fragment shader")) {
      continue;
    }
    uint32_t vs_outcome = 99, fs_outcome = 99;
    CheckOk(gpusvc::Compile(round->manager, vs.get(), &vs_outcome), "compile vertex shader");
    CheckOk(gpusvc::Compile(round->manager, fs.get(), &fs_outcome), "compile fragment shader");
    Check(vs_outcome != GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED &&
              fs_outcome != GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED,
          "shaders compile: " + gpusvc::ShaderInfoLog(fs.get()));
    round->result.deferred_compiles +=
        (vs_outcome == GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED) +
        (fs_outcome == GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_DEFERRED);
    gpusvc::LinkedProgramPtr program;
    if (!CheckOk(gpusvc::Link(round->manager, vs.get(), fs.get(), options, &program), "link")) {
      continue;
    }
    uint32_t origin = 99;
    uint64_t object = 0;
    CheckOk(gpusvc_program_manager_linked_program_origin(program.get(), &origin), "origin");
    CheckOk(gpusvc_program_manager_linked_program_object(program.get(), &object), "object");
    round->result.linked += origin == GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED;
    round->result.hits += origin == GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT;
    round->result.relinked += origin == GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_RELINKED_AFTER_REJECTION;
    // The reflection gpusvc keeps (from the driver, or from the cache on a hit).
    std::vector<gpusvc::ActiveVariable> attributes, uniforms;
    CheckOk(gpusvc::ReadActiveVariables(program.get(), GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_ATTRIBUTE,
                                        &attributes), "attributes");
    CheckOk(gpusvc::ReadActiveVariables(program.get(), GPUSVC_PROGRAM_CACHE_VARIABLE_KIND_UNIFORM,
                                        &uniforms), "uniforms");
    Check(attributes.size() == 1 && attributes[0].name == "a_position" &&
              attributes[0].location == GLint(kPositionLocation),
          "a_position at its bound location");
    Check(uniforms.size() == 1 && uniforms[0].name == "u_color" && uniforms[0].has_location,
          "u_color reflected");
    if (object != 0 && uniforms.size() == 1) {
      round->target->Draw(i, GLuint(object), uniforms[0].location);
    }
    glFinish();
  }
  CheckOk(gpusvc::SchedulerRelease(round->scheduler, 0, round->raster_client, round->release_count),
          "release the raster client");
  return GPUSVC_SCHEDULER_TASK_DONE;
}

// The display task: runs once the raster task released its token; checks every pixel.
gpusvc_scheduler_task_result DisplayTask(Round* round) {
  round->result.order.push_back("display");
  std::vector<uint8_t> px = round->target->Read();
  for (int i = 0; i < kPrograms; ++i) {
    bool ok = true;
    for (int c = 0; c < 4; ++c) {
      int want = int(kConstants[i][c] * kColor[c] * 255.0f + 0.5f);
      ok = ok && std::abs(int(px[size_t(4 * i + c)]) - want) <= 1;
    }
    char what[128];
    std::snprintf(what, sizeof what, "%s: pixel %d is %u,%u,%u,%u", round->name, i,
                  px[size_t(4 * i)], px[size_t(4 * i + 1)], px[size_t(4 * i + 2)],
                  px[size_t(4 * i + 3)]);
    round->result.pixels_ok += Check(ok, what);
  }
  return GPUSVC_SCHEDULER_TASK_DONE;
}

// Runs one round on the scheduler: "raster" (low priority) is enqueued, then "display" (high
// priority), which would run first but waits on the token (raster client, release_count) that
// raster releases. (As with Chromium's sync points, a wait counts only on a release enqueued
// before it: one that could never come is dropped instead of blocking.)
RoundResult RunRound(Round& round, uint64_t raster_stream, uint64_t display_stream) {
  gpusvc_sync_token token = gpusvc::SyncToken(0, round.raster_client, round.release_count, true);
  CheckOk(gpusvc::SchedulerEnqueueCallable(round.scheduler, raster_stream,
                                           [&round] { return RasterTask(&round); }),
          "enqueue raster");
  CheckOk(gpusvc::SchedulerEnqueueCallable(round.scheduler, display_stream,
                                           [&round] { return DisplayTask(&round); }, {token}),
          "enqueue display");
  size_t ran = 0;
  CheckOk(gpusvc::RunSchedulerUntilIdle(round.scheduler, &ran), "run the scheduler");
  Check(ran == 2, round.name + std::string(": 2 task runs, saw ") + std::to_string(ran));
  Check(round.result.order == std::vector<std::string>{"raster", "display"},
        round.name + std::string(": display waited for raster's token"));
  return round.result;
}

// A round with a fresh program manager over `cache` (a renderer of the GPU process).
RoundResult ManagerRound(const char* name, HostGl& gl, const gpusvc_program_cache* cache,
                         const gpusvc_scheduler* scheduler, const Target& target,
                         uint64_t release_count, uint64_t raster, uint64_t display) {
  gpusvc::ProgramManagerPtr manager;
  if (!CheckOk(gpusvc::NewHostProgramManager(gl.Callbacks(), cache, "example 1", &manager),
               "new host program manager")) {
    return RoundResult();
  }
  Round round{name, manager.get(), scheduler, &target, 1, release_count, {}};
  return RunRound(round, raster, display);
}

// A folder of our own for the browser's store, removed at the end with what the store wrote.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                          "/gpusvc-example-store.XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) != nullptr) path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

int main() {
  std::printf("gpusvc %s example host\n", gpusvc::Version().c_str());
  {
    EglContext egl;
    if (!egl.Open()) return 1;
    // Mesa hands out program binaries only while its shader cache is on (never set
    // MESA_SHADER_CACHE_DISABLE; ctest points MESA_SHADER_CACHE_DIR into the build folder).
    GLint formats = 0;
    glGetIntegerv(GL_NUM_PROGRAM_BINARY_FORMATS, &formats);
    if (!Check(formats > 0, "the driver has program binary formats")) return 1;

    Target target;
    if (!Check(target.Complete(), "framebuffer complete")) return 1;

    // The stamp both sides agree on: this driver and this host build. The GPU process computes
    // it and sends it to the browser, which opens the store for it.
    gpusvc::DriverStrings driver;
    driver.vendor = reinterpret_cast<const char*>(glGetString(GL_VENDOR));
    driver.renderer = reinterpret_cast<const char*>(glGetString(GL_RENDERER));
    driver.version = reinterpret_cast<const char*>(glGetString(GL_VERSION));
    driver.context = "OpenGL ES";
    gpusvc::StampFields fields;
    fields.host_product = "gpusvc example host";
    fields.host_version = gpusvc::Version();
    std::string stamp;
    if (!CheckOk(gpusvc::StampText(driver, fields, &stamp), "stamp text")) return 1;

    // Browser side: the disk store alone (no GL, no program cache).
    TempDir dir;
    if (!Check(!dir.path().empty(), "a temporary folder for the store")) return 1;
    gpusvc::StoreOptions store_options = gpusvc::StoreOptions::Defaults();
    store_options.dir = dir.path();
    store_options.stamp = stamp;
    gpusvc::ProgramCacheStorePtr store;
    if (!CheckOk(gpusvc::OpenProgramCacheStore(store_options, &store), "open the store")) return 1;

    // GPU side: a cache whose saves go to the browser through the sink.
    Channel channel;
    SinkToBrowser sink(&channel);
    gpusvc_program_cache_config config{};
    if (!CheckOk(gpusvc::ProgramCacheDefaults(GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP, &config),
                 "cache defaults")) {
      return 1;
    }
    gpusvc::ProgramCachePtr cache;
    if (!CheckOk(gpusvc::NewPersistingProgramCache(config, stamp, &sink, &cache),
                 "new persisting program cache")) {
      return 1;
    }

    gpusvc::SyncManagerPtr sync;
    gpusvc::SchedulerPtr scheduler;
    uint64_t raster = 0, display = 0;
    if (!CheckOk(gpusvc::NewSyncManager(&sync), "new sync manager") ||
        !CheckOk(gpusvc::NewScheduler(&scheduler, sync.get()), "new scheduler") ||
        !CheckOk(gpusvc::AddSchedulerStream(scheduler.get(), GPUSVC_SCHEDULER_PRIORITY_LOW, &raster),
                 "raster stream") ||
        !CheckOk(gpusvc::AddSchedulerStream(scheduler.get(), GPUSVC_SCHEDULER_PRIORITY_HIGH,
                                            &display), "display stream") ||
        !CheckOk(gpusvc::CreateSchedulerClient(scheduler.get(), raster, 0, 1), "raster client")) {
      return 1;
    }

    HostGl gl;
    // Round 1: an empty cache; every program is compiled and linked by the host's GL.
    RoundResult first =
        ManagerRound("round 1", gl, cache.get(), scheduler.get(), target, 1, raster, display);
    GlCounts after_first = gl.counts;
    // Round 2: a second manager (a second renderer) over the same cache: every program is a
    // hit from memory, restored from its binary with no compile and no link.
    RoundResult second =
        ManagerRound("round 2", gl, cache.get(), scheduler.get(), target, 2, raster, display);
    GlCounts after_second = gl.counts;

    // The browser persists what the GPU process sent.
    CheckOk(gpusvc_program_cache_flush_persist(cache.get()), "flush the persistence queue");
    BrowserCounts browser;
    BrowserReceive(store.get(), channel, &browser);

    // The GPU process starts again: a new, empty cache; the browser streams its store back
    // (hot entries first, then the most recently used) and the GPU side inserts each entry,
    // which is checked (stamp, checksums, key) before it counts.
    cache.reset();
    if (!CheckOk(gpusvc::NewPersistingProgramCache(config, stamp, &sink, &cache),
                 "new persisting program cache after the restart")) {
      return 1;
    }
    int streamed = 0, inserted = 0;
    CheckOk(gpusvc::ForEachStoreEntry(store.get(),
                                      [&](const gpusvc_program_cache_sha1&, const uint8_t* entry,
                                          size_t len) {
                                        ++streamed;
                                        inserted += CheckOk(
                                            gpusvc::InsertEntry(cache.get(), entry, len),
                                            "insert a streamed entry");
                                        return true;
                                      }),
            "stream the store");
    // Round 3: every program from the streamed entries.
    RoundResult third =
        ManagerRound("round 3", gl, cache.get(), scheduler.get(), target, 3, raster, display);
    gpusvc_program_cache_persist_stats_snapshot persist{};
    CheckOk(gpusvc::PersistStats(cache.get(), &persist), "persistence counters");

    GlCounts& all = gl.counts;
    Check(first.linked == kPrograms && first.hits == 0, "round 1 links every program");
    Check(after_first.compiles == 2 * kPrograms && after_first.links == kPrograms &&
              after_first.binaries_read == kPrograms,
          "round 1: the host GL compiled 6 shaders, linked 3 programs, read 3 binaries");
    Check(second.hits == kPrograms && second.linked == 0 && second.relinked == 0,
          "round 2 gets every program from the cache");
    Check(second.deferred_compiles == 2 * kPrograms, "round 2 defers every compile");
    Check(after_second.compiles == after_first.compiles && after_second.links == after_first.links,
          "round 2 compiled and linked nothing");
    Check(sink.sent == kPrograms, "the sink sent every linked program");
    Check(browser.persisted == kPrograms, "the browser persisted every program");
    Check(streamed == kPrograms && inserted == kPrograms,
          "the store streamed every program back and the new cache took it");
    Check(persist.inserted == uint64_t(kPrograms), "the cache counts the inserted entries");
    Check(third.hits == kPrograms && third.linked == 0 && third.relinked == 0,
          "round 3 gets every program from the streamed entries");
    Check(all.compiles == after_first.compiles && all.links == after_first.links,
          "rounds 2 and 3 compiled and linked nothing");
    Check(all.binaries_loaded == 2 * kPrograms && all.binaries_refused == 0,
          "rounds 2 and 3 loaded 6 binaries, none refused");
    Check(all.programs_deleted == 3 * kPrograms, "every program object was deleted");

    for (const RoundResult* r : {&first, &second, &third}) {
      std::printf("%s: linked %d, hits %d, pixels ok %d/%d\n",
                  r == &first ? "round 1" : r == &second ? "round 2" : "round 3", r->linked,
                  r->hits, r->pixels_ok, kPrograms);
    }
    std::printf("persistence: sent %d, persisted %d (touched %d), streamed back %d, "
                "inserted %d, hits after the restart %d\n",
                sink.sent.load(), browser.persisted, browser.touched, streamed, inserted,
                third.hits);
    std::printf("host GL: %d compiles, %d links, %d binaries read, %d loaded, %d refused, "
                "%d shaders and %d programs deleted\n",
                all.compiles, all.links, all.binaries_read, all.binaries_loaded,
                all.binaries_refused, all.shaders_deleted, all.programs_deleted);
    // Everything gpusvc made on this context is freed before the context goes; the sink
    // outlives its cache, the store its folder.
    scheduler.reset();
    sync.reset();
    cache.reset();
    store.reset();
  }
  if (g_failures != 0) {
    std::printf("example host: %d checks FAILED\n", g_failures);
    return 1;
  }
  std::printf("example host: ok\n");
  return 0;
}
