// Sections: [GLFW and ImGui sessions] [off-screen framebuffer] [interactive] [screenshot]
#include "viz/app/gl_app.hpp"

#define GLFW_INCLUDE_GLEXT
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <cfloat>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "reference/error.hpp"
#include "sim/pipeline/output_files.hpp"

#ifdef RINGLAB_VIZ_HAVE_PNG
#include <stb_image_write.h>
#endif

namespace ringlab::viz {

namespace {

// ---- [GLFW and ImGui sessions] ---------------------------------------------------------------

// GLFW reports errors through a plain function pointer; this one only prints (it keeps no state).
void print_glfw_error(int code, const char* text) {
  std::fprintf(stderr, "ringlab-viz: GLFW error %d: %s\n", code, text);
}

// glfwInit .. glfwTerminate and one window with a current OpenGL 3.0 context.
class GlfwWindow {
 public:
  GlfwWindow(int width, int height, bool visible, const char* title) {
    if (!glfwInit()) {
      // One line: GLFW's own reason folded into ours (no error callback yet, so nothing else prints).
      const char* reason = nullptr;
      glfwGetError(&reason);
      throw UsageError(std::string("cannot open a display for the window") +
                       (reason ? " (" + std::string(reason) + ")" : "") +
                       "; set DISPLAY, or for screenshots run under xvfb-run -a");
    }
    glfwSetErrorCallback(print_glfw_error);  // from here on, GLFW errors are printed as they happen
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
    glfwWindowHint(GLFW_VISIBLE, visible ? GLFW_TRUE : GLFW_FALSE);
    window_ = glfwCreateWindow(width, height, title, nullptr, nullptr);
    if (!window_) {
      glfwTerminate();
      throw UsageError(
          "cannot create an OpenGL 3.0 window; check the display's GL driver (Mesa: LIBGL_ALWAYS_SOFTWARE=1)");
    }
    glfwMakeContextCurrent(window_);
  }
  ~GlfwWindow() {
    glfwDestroyWindow(window_);
    glfwTerminate();
  }
  GlfwWindow(const GlfwWindow&) = delete;
  GlfwWindow& operator=(const GlfwWindow&) = delete;
  GLFWwindow* get() const { return window_; }

 private:
  GLFWwindow* window_ = nullptr;
};

class ImGuiSession {
 public:
  explicit ImGuiSession(GLFWwindow* window, bool install_callbacks) {
    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGui::GetIO().IniFilename = nullptr;  // the layout is fixed: nothing to save
    ImGui::StyleColorsDark();
    ImGui_ImplGlfw_InitForOpenGL(window, install_callbacks);
    ImGui_ImplOpenGL3_Init("#version 130");
  }
  ~ImGuiSession() {
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
  }
  ImGuiSession(const ImGuiSession&) = delete;
  ImGuiSession& operator=(const ImGuiSession&) = delete;
};

constexpr float kClear[4] = {0.08f, 0.09f, 0.10f, 1.0f};

void render(int width, int height) {
  ImGui::Render();
  glViewport(0, 0, width, height);
  glClearColor(kClear[0], kClear[1], kClear[2], kClear[3]);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

// ---- [off-screen framebuffer] ----------------------------------------------------------------

// A framebuffer object with an RGBA8 colour texture, bound while alive: rendering does not depend
// on a visible window or the screen's size. The GL 3.0 entry points come from GLFW's loader.
class OffscreenTarget {
 public:
  OffscreenTarget(int width, int height) {
    gen_ = reinterpret_cast<PFNGLGENFRAMEBUFFERSPROC>(glfwGetProcAddress("glGenFramebuffers"));
    bind_ = reinterpret_cast<PFNGLBINDFRAMEBUFFERPROC>(glfwGetProcAddress("glBindFramebuffer"));
    attach_ = reinterpret_cast<PFNGLFRAMEBUFFERTEXTURE2DPROC>(glfwGetProcAddress("glFramebufferTexture2D"));
    status_ = reinterpret_cast<PFNGLCHECKFRAMEBUFFERSTATUSPROC>(glfwGetProcAddress("glCheckFramebufferStatus"));
    delete_ = reinterpret_cast<PFNGLDELETEFRAMEBUFFERSPROC>(glfwGetProcAddress("glDeleteFramebuffers"));
    if (!gen_ || !bind_ || !attach_ || !status_ || !delete_) {
      throw UsageError("the OpenGL driver has no framebuffer objects (GL 3.0); screenshots need them");
    }
    glGenTextures(1, &texture_);
    glBindTexture(GL_TEXTURE_2D, texture_);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    gen_(1, &framebuffer_);
    bind_(GL_FRAMEBUFFER, framebuffer_);
    attach_(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, texture_, 0);
    if (status_(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE) {
      throw UsageError("cannot render off-screen at " + std::to_string(width) + "x" + std::to_string(height) +
                       "; try a smaller --size");
    }
  }
  ~OffscreenTarget() {
    bind_(GL_FRAMEBUFFER, 0);
    delete_(1, &framebuffer_);
    glDeleteTextures(1, &texture_);
  }
  OffscreenTarget(const OffscreenTarget&) = delete;
  OffscreenTarget& operator=(const OffscreenTarget&) = delete;

  // Top row first (PNG order); GL's rows start at the bottom.
  static std::vector<unsigned char> read_rgba(int width, int height) {
    std::vector<unsigned char> pixels(static_cast<size_t>(width) * static_cast<size_t>(height) * 4);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
    const size_t row = static_cast<size_t>(width) * 4;
    std::vector<unsigned char> flipped(pixels.size());
    for (int y = 0; y < height; ++y)
      std::copy_n(pixels.begin() + static_cast<std::ptrdiff_t>(row * static_cast<size_t>(height - 1 - y)), row,
                  flipped.begin() + static_cast<std::ptrdiff_t>(row * static_cast<size_t>(y)));
    return flipped;
  }

 private:
  PFNGLGENFRAMEBUFFERSPROC gen_ = nullptr;
  PFNGLBINDFRAMEBUFFERPROC bind_ = nullptr;
  PFNGLFRAMEBUFFERTEXTURE2DPROC attach_ = nullptr;
  PFNGLCHECKFRAMEBUFFERSTATUSPROC status_ = nullptr;
  PFNGLDELETEFRAMEBUFFERSPROC delete_ = nullptr;
  GLuint texture_ = 0, framebuffer_ = 0;
};

#ifdef RINGLAB_VIZ_HAVE_PNG
void append_bytes(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
}
#endif

std::string geometry_json(Viewer& viewer, const ScreenshotOptions& options) {
  nlohmann::json panels = nlohmann::json::object();
  const ViewState& view = viewer.view();
  for (int p = 0; p < static_cast<int>(Panel::count); ++p) {
    const Rect& r = view.canvas[static_cast<size_t>(p)];
    if (!view.drawn[static_cast<size_t>(p)] || r.width() <= 0) continue;  // not drawn, or no canvas
    panels[panel_name(static_cast<Panel>(p))] = {{"canvas", {r.x0, r.y0, r.x1, r.y1}}};
  }
  const nlohmann::json document = {{"size", {options.width, options.height}},
                                   {"step", viewer.playback().step()},
                                   {"grid_blocks", view.grid_blocks},
                                   {"ranks", viewer.model().ranks},
                                   {"panels", panels}};
  return document.dump(2) + "\n";
}

}  // namespace

// ---- [interactive] ---------------------------------------------------------------------------

int run_window(Viewer& viewer) {
  GlfwWindow window(1600, 1000, true, "ringlab-viz");
  glfwSwapInterval(1);
  ImGuiSession imgui(window.get(), true);
  double last = glfwGetTime();
  while (!glfwWindowShouldClose(window.get())) {
    glfwPollEvents();
    const double now = glfwGetTime();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    viewer.frame(static_cast<float>(now - last));
    last = now;
    int width = 0, height = 0;
    glfwGetFramebufferSize(window.get(), &width, &height);
    render(width, height);
    glfwSwapBuffers(window.get());
  }
  viewer.wait_for_run();
  return 0;
}

// ---- [screenshot] ----------------------------------------------------------------------------

int take_screenshot(Viewer& viewer, const ScreenshotOptions& options) {
#ifndef RINGLAB_VIZ_HAVE_PNG
  (void)viewer;
  throw UsageError("this ringlab-viz was built without stb_image_write.h (Debian libstb-dev), so it cannot write " +
                   options.path);
#else
  check_output_file(options.path);
  if (!options.geometry_path.empty()) check_output_file(options.geometry_path);
  GlfwWindow window(64, 64, false, "ringlab-viz screenshot");
  ImGuiSession imgui(window.get(), false);  // no input callbacks: nothing hovers in a screenshot
  OffscreenTarget target(options.width, options.height);
  for (int frame = 0; frame < std::max(1, options.frames); ++frame) {
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGuiIO& io = ImGui::GetIO();
    io.DisplaySize = {static_cast<float>(options.width), static_cast<float>(options.height)};
    io.DisplayFramebufferScale = {1, 1};
    io.MousePos = {-FLT_MAX, -FLT_MAX};
    ImGui::NewFrame();
    viewer.frame(0);
    render(options.width, options.height);
  }
  glFinish();
  const std::vector<unsigned char> pixels = OffscreenTarget::read_rgba(options.width, options.height);
  std::string png;
  if (!stbi_write_png_to_func(append_bytes, &png, options.width, options.height, 4, pixels.data(), options.width * 4)) {
    throw UsageError("cannot encode the PNG for " + options.path);
  }
  write_file_atomically(options.path, png);
  if (!options.geometry_path.empty()) write_file_atomically(options.geometry_path, geometry_json(viewer, options));
  return 0;
#endif
}

}  // namespace ringlab::viz
