// gpusvc never clobbers the host's GL state: the test makes its own EGL context current (raw
// EGL, a GLES 3 context through libEGL loaded at run time, so the suite links no EGL), sets a
// clear color, then uses a gpusvc_gl_context (open, compile, link miss and hit, a failed
// compile, the frees). After each call the host's context, its client API and its clear color
// are as they were.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gl_support.h"
#include "gpusvc.hpp"

namespace {

using EGLDisplay = void*;
using EGLContext = void*;
using EGLConfig = void*;
using EGLSurface = void*;
using EGLint = int32_t;
using EGLBoolean = unsigned;

constexpr EGLint kEglNone = 0x3038;
constexpr EGLint kEglSurfaceType = 0x3033;
constexpr EGLint kEglPbufferBit = 0x0001;
constexpr EGLint kEglRenderableType = 0x3040;
constexpr EGLint kEglOpenglEs3Bit = 0x0040;
constexpr EGLint kEglContextMajorVersion = 0x3098;
constexpr unsigned kEglOpenglEsApi = 0x30A0;
constexpr unsigned kEglPlatformSurfacelessMesa = 0x31DD;
constexpr unsigned kEglPlatformDevice = 0x313F;
constexpr unsigned kGlColorClearValue = 0x0C22;

// The host: raw EGL and the three GL entry points it needs.
struct HostEgl {
  void* lib = nullptr;
  void* (*GetProcAddress)(const char*) = nullptr;
  EGLDisplay (*GetPlatformDisplayEXT)(unsigned, void*, const EGLint*) = nullptr;
  EGLBoolean (*QueryDevicesEXT)(EGLint, void**, EGLint*) = nullptr;
  EGLBoolean (*Initialize)(EGLDisplay, EGLint*, EGLint*) = nullptr;
  EGLBoolean (*BindAPI)(unsigned) = nullptr;
  unsigned (*QueryAPI)() = nullptr;
  EGLBoolean (*ChooseConfig)(EGLDisplay, const EGLint*, EGLConfig*, EGLint, EGLint*) = nullptr;
  EGLContext (*CreateContext)(EGLDisplay, EGLConfig, EGLContext, const EGLint*) = nullptr;
  EGLBoolean (*MakeCurrent)(EGLDisplay, EGLSurface, EGLSurface, EGLContext) = nullptr;
  EGLContext (*GetCurrentContext)() = nullptr;
  EGLBoolean (*DestroyContext)(EGLDisplay, EGLContext) = nullptr;
  void (*ClearColor)(float, float, float, float) = nullptr;
  void (*GetFloatv)(unsigned, float*) = nullptr;

  EGLDisplay display = nullptr;
  EGLContext context = nullptr;

  template <typename F>
  bool Load(F* f, const char* name) {
    *f = reinterpret_cast<F>(GetProcAddress(name));
    return *f != nullptr;
  }

  // Empty on success, else why the host context could not be made.
  std::string Open() {
    lib = dlopen("libEGL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return "no libEGL.so.1";
    GetProcAddress = reinterpret_cast<void* (*)(const char*)>(dlsym(lib, "eglGetProcAddress"));
    if (GetProcAddress == nullptr) return "no eglGetProcAddress";
    if (!Load(&GetPlatformDisplayEXT, "eglGetPlatformDisplayEXT") ||
        !Load(&Initialize, "eglInitialize") || !Load(&BindAPI, "eglBindAPI") ||
        !Load(&QueryAPI, "eglQueryAPI") || !Load(&ChooseConfig, "eglChooseConfig") ||
        !Load(&CreateContext, "eglCreateContext") || !Load(&MakeCurrent, "eglMakeCurrent") ||
        !Load(&GetCurrentContext, "eglGetCurrentContext") ||
        !Load(&DestroyContext, "eglDestroyContext"))
      return "EGL entry points missing";
    display = GetPlatformDisplayEXT(kEglPlatformSurfacelessMesa, nullptr, nullptr);
    EGLint major = 0, minor = 0;
    if (display == nullptr || !Initialize(display, &major, &minor)) {
      // Not Mesa: the first EGL device, as gpusvc opens it.
      void* devices[8];
      EGLint n = 0;
      if (!Load(&QueryDevicesEXT, "eglQueryDevicesEXT") || !QueryDevicesEXT(8, devices, &n) ||
          n == 0)
        return "no EGL display";
      display = GetPlatformDisplayEXT(kEglPlatformDevice, devices[0], nullptr);
      if (display == nullptr || !Initialize(display, &major, &minor)) return "no EGL display";
    }
    if (!BindAPI(kEglOpenglEsApi)) return "eglBindAPI(GLES) failed";
    const EGLint attribs[] = {kEglSurfaceType, kEglPbufferBit, kEglRenderableType,
                              kEglOpenglEs3Bit, kEglNone};
    EGLConfig config = nullptr;
    EGLint count = 0;
    if (!ChooseConfig(display, attribs, &config, 1, &count) || count == 0) return "no GLES3 config";
    const EGLint ctx_attribs[] = {kEglContextMajorVersion, 3, kEglNone};
    context = CreateContext(display, config, nullptr, ctx_attribs);
    if (context == nullptr) return "eglCreateContext failed";
    if (!MakeCurrent(display, nullptr, nullptr, context)) return "surfaceless make-current failed";
    if (!Load(&ClearColor, "glClearColor") || !Load(&GetFloatv, "glGetFloatv"))
      return "GL entry points missing";
    return "";
  }

  std::vector<float> Clear() const {
    std::vector<float> c(4, -1.0f);
    GetFloatv(kGlColorClearValue, c.data());
    return c;
  }

  ~HostEgl() {
    if (context != nullptr) {
      MakeCurrent(display, nullptr, nullptr, nullptr);
      DestroyContext(display, context);
    }
    // libEGL stays loaded (Mesa does not like being unloaded while gpusvc uses it).
  }
};

class GlStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = host_.Open();
    if (!why.empty()) {
      if (GlRequired()) FAIL() << "GPUSVC_REQUIRE_GL is set but no host EGL context: " << why;
      GTEST_SKIP() << "no host EGL context: " << why;
    }
    host_.ClearColor(0.125f, 0.25f, 0.5f, 0.75f);
    clear_ = host_.Clear();
    ASSERT_EQ(clear_, (std::vector<float>{0.125f, 0.25f, 0.5f, 0.75f}));
  }

  // The host's context, API and clear color are as they were after `what`.
  void Check(const char* what) {
    EXPECT_EQ(host_.GetCurrentContext(), host_.context) << "after " << what;
    EXPECT_EQ(host_.QueryAPI(), kEglOpenglEsApi) << "after " << what;
    EXPECT_EQ(host_.Clear(), clear_) << "after " << what;
  }

  HostEgl host_;
  std::vector<float> clear_;
};

TEST_F(GlStateTest, GpusvcCallsLeaveTheHostContextCurrentAndUntouched) {
  gpusvc::GlContextPtr ctx;
  GPUSVC_OPEN_OR_SKIP(GPUSVC_GL_API_AUTO, ctx);
  Check("gpusvc_gl_context_open");

  gpusvc_program_cache_config config{};
  ASSERT_EQ(gpusvc::ProgramCacheDefaults(GPUSVC_PROGRAM_CACHE_PROFILE_DESKTOP, &config), GPUSVC_OK);
  gpusvc::ProgramCachePtr cache;
  ASSERT_EQ(gpusvc::NewProgramCache(config, &cache), GPUSVC_OK);
  gpusvc::ProgramManagerPtr manager;
  ASSERT_EQ(gpusvc::NewGlProgramManager(ctx.get(), cache.get(), "gl state", &manager), GPUSVC_OK);
  const std::string vs = Glsl(ctx.get(), "in vec4 a_position;\nvoid main() { gl_Position = a_position; }\n");
  const std::string fs = Glsl(ctx.get(), "out vec4 o_color;\nvoid main() { o_color = vec4(1.0); }\n");

  std::vector<gpusvc::LinkedProgramPtr> programs;
  for (int round = 0; round < 2; ++round) {  // a miss (link, binary saved), then a hit
    gpusvc::ShaderPtr v, f;
    ASSERT_EQ(gpusvc::NewShader(manager.get(), GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX, vs, &v),
              GPUSVC_OK);
    ASSERT_EQ(gpusvc::NewShader(manager.get(), GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT, fs, &f),
              GPUSVC_OK);
    uint32_t outcome = 99;
    ASSERT_EQ(gpusvc::Compile(manager.get(), v.get(), &outcome), GPUSVC_OK);
    Check("compile");
    ASSERT_EQ(gpusvc::Compile(manager.get(), f.get(), &outcome), GPUSVC_OK);
    gpusvc::LinkedProgramPtr p;
    ASSERT_EQ(gpusvc::Link(manager.get(), v.get(), f.get(), gpusvc::LinkOptions{}, &p), GPUSVC_OK)
        << gpusvc::LastErrorDetail();
    uint32_t origin = 99;
    ASSERT_EQ(gpusvc_program_manager_linked_program_origin(p.get(), &origin), GPUSVC_OK);
    EXPECT_EQ(origin, round == 0 ? GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_LINKED
                                 : GPUSVC_PROGRAM_MANAGER_LINK_ORIGIN_CACHE_HIT);
    Check(round == 0 ? "link (miss)" : "link (hit)");
    programs.push_back(std::move(p));
  }
  {
    gpusvc::ShaderPtr bad;
    ASSERT_EQ(gpusvc::NewShader(manager.get(), GPUSVC_PROGRAM_CACHE_SHADER_STAGE_FRAGMENT,
                                Glsl(ctx.get(), "void main() { nope; }\n"), &bad),
              GPUSVC_OK);
    uint32_t outcome = 99;
    ASSERT_EQ(gpusvc::Compile(manager.get(), bad.get(), &outcome), GPUSVC_OK);
    EXPECT_EQ(outcome, GPUSVC_PROGRAM_MANAGER_COMPILE_OUTCOME_FAILED);
    Check("a failed compile");
  }
  Check("freeing shaders");
  programs.clear();
  Check("freeing linked programs");
  ctx.reset();
  manager.reset();
  Check("freeing the context and the manager");
}

}  // namespace
