// The app layer: GLFW windows, the OpenGL context and the ImGui backends — everything the
// viewer itself does not touch. Two ways to drive the same Viewer::frame():
//   run_window       the interactive desktop app;
//   take_screenshot  hidden window, frames rendered into an off-screen framebuffer, read back
//                    with glReadPixels and written as PNG (how the book's figures are made).
#pragma once

#include <string>

#include "viz/view/viewer.hpp"

namespace ringlab::viz {

struct ScreenshotOptions {
  std::string path;  // the PNG, written through a temporary name and a rename
  int width = 1600, height = 1000;
  int frames = 3;             // ImGui settles window sizes over the first frames
  std::string geometry_path;  // optional JSON: each panel's canvas rectangle, for pixel tests
};

// Opens a window and runs until it is closed; returns the exit status.
int run_window(Viewer& viewer);

// Throws UsageError when there is no display (run under xvfb-run -a), no PNG support, or the
// output cannot be written; returns 0.
int take_screenshot(Viewer& viewer, const ScreenshotOptions& options);

}  // namespace ringlab::viz
