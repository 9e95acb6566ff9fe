// Test main: a fresh MESA_SHADER_CACHE_DIR for this process (never MESA_SHADER_CACHE_DISABLE,
// which turns program binaries off on Mesa), set before any GL context exists.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

int main(int argc, char** argv) {
  std::string dir = (std::filesystem::temp_directory_path() / "gpusvc-mesa-cache-XXXXXX").string();
  const bool have_dir = mkdtemp(dir.data()) != nullptr;
  if (have_dir) setenv("MESA_SHADER_CACHE_DIR", dir.c_str(), 1);
  testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (have_dir) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  return rc;
}
