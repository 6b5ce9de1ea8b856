/* stb_image_write's implementation for the browser build (web/CMakeLists.txt): on the desktop
   Debian's libstb holds it. */
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
