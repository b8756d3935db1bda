// The one translation unit that compiles stb_image_write's implementation (a single-header
// library: exactly one file defines STB_IMAGE_WRITE_IMPLEMENTATION). Third-party code: built in
// its own target without ringlab's warning flags.
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
