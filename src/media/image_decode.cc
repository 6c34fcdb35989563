#include "media/image_decode.h"

#include <jpeglib.h>
#include <png.h>
#include <webp/decode.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace ember::media {
namespace {

Status CheckDimensions(int64_t width, int64_t height, const MediaLimits& limits, const char* format) {
  if (width <= 0 || height <= 0) {
    return InvalidArgument(fmt::format("the {} image declares a size of {}x{}", format, width, height));
  }
  if (width > limits.max_image_side || height > limits.max_image_side) {
    return InvalidArgument(fmt::format("the {} image is {}x{}, over the limit of {} pixels on a side", format, width,
                                       height, limits.max_image_side));
  }
  if (width * height > limits.max_image_pixels) {
    return InvalidArgument(fmt::format("the {} image is {}x{} = {} pixels, over the limit of {} pixels", format,
                                       width, height, width * height, limits.max_image_pixels));
  }
  return Status::Ok();
}

uint16_t Read16(const uint8_t* p, bool little) { return little ? p[0] | p[1] << 8 : p[0] << 8 | p[1]; }
uint32_t Read32(const uint8_t* p, bool little) {
  return little ? uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24
                : uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

// ---------------------------------------------------------------------------------------------
// JPEG

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}
void JpegOutputMessage(j_common_ptr) {}  // warnings (corrupt data that libjpeg recovers from) are dropped

// A source manager over memory whose end of data is an error: libjpeg's own memory source would
// insert a fake EOI and decode a truncated file as grey, where PIL raises "image file is truncated".
void JpegInitSource(j_decompress_ptr) {}
boolean JpegFillInputBuffer(j_decompress_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  std::snprintf(err->message, sizeof(err->message), "the JPEG data ends before the image is complete (truncated)");
  std::longjmp(err->jump, 1);
}
void JpegSkipInputData(j_decompress_ptr cinfo, long num_bytes) {
  if (num_bytes <= 0) return;
  if (static_cast<size_t>(num_bytes) > cinfo->src->bytes_in_buffer) JpegFillInputBuffer(cinfo);
  cinfo->src->next_input_byte += num_bytes;
  cinfo->src->bytes_in_buffer -= num_bytes;
}
void JpegTermSource(j_decompress_ptr) {}

// PIL's CMYK -> RGB (Convert.c cmyk2rgb): nk = 255 - k; out = nk - MULDIV255(c, nk).
inline uint8_t Cmyk(int c, int nk) {
  const int tmp = c * nk + 128;
  return static_cast<uint8_t>(std::clamp(nk - (((tmp >> 8) + tmp) >> 8), 0, 255));
}

// What the JPEG decode fills in; owned by the caller so that the function holding the setjmp
// has only C state and pointers in its frame (a longjmp skips no destructor and clobbers nothing).
struct JpegJob {
  std::span<const uint8_t> bytes;
  const MediaLimits* limits = nullptr;
  RgbImage image;
  std::vector<uint8_t> row;
  std::vector<uint8_t> exif;
  std::string failure;
};

// String work for the setjmp functions happens in these out-of-line helpers, so that no string
// temporaries live in a frame a longjmp returns to (GCC's -Wclobbered, and no skipped destructor).
[[gnu::noinline]] void SetFailure(std::string* failure, std::string message) { *failure = std::move(message); }
[[gnu::noinline]] void PrefixFailure(std::string* failure, const char* prefix, const char* detail) {
  if (failure->rfind("the ", 0) != 0) *failure = std::string(prefix) + (failure->empty() ? detail : *failure);
}

// Records `status`'s message as the failure; true when there is one. The Status is destroyed on
// return, before the caller longjmps.
[[gnu::noinline]] bool Failed(Status status, std::string* failure) {
  if (status.ok()) return false;
  *failure = status.message();
  return true;
}

bool DecodeJpegInto(JpegJob* job) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  jpeg_source_mgr src;
  std::memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = JpegErrorExit;
  err.mgr.output_message = JpegOutputMessage;
  err.message[0] = 0;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    if (job->failure.empty()) PrefixFailure(&job->failure, "the JPEG image is corrupt: ", err.message);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  src.init_source = JpegInitSource;
  src.fill_input_buffer = JpegFillInputBuffer;
  src.skip_input_data = JpegSkipInputData;
  src.resync_to_restart = jpeg_resync_to_restart;
  src.term_source = JpegTermSource;
  src.next_input_byte = job->bytes.data();
  src.bytes_in_buffer = job->bytes.size();
  cinfo.src = &src;
  jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&cinfo, TRUE);
  if (Failed(CheckDimensions(cinfo.image_width, cinfo.image_height, *job->limits, "JPEG"), &job->failure)) {
    std::longjmp(err.jump, 1);
  }
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  if (cinfo.num_components != 1 && cinfo.num_components != 3 && !cmyk) {
    SetFailure(&job->failure, fmt::format("the JPEG image has {} colour components; 1 (grey), 3 (YCbCr/RGB) or "
                                          "4 (CMYK) are supported", cinfo.num_components));
    std::longjmp(err.jump, 1);
  }
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;  // grey is replicated to RGB by libjpeg
  cinfo.dct_method = JDCT_ISLOW;                      // PIL's defaults
  cinfo.do_fancy_upsampling = TRUE;
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m != nullptr; m = m->next) {
    if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && std::memcmp(m->data, "Exif\0\0", 6) == 0) {
      job->exif.assign(m->data, m->data + m->data_length);
      break;
    }
  }
  jpeg_start_decompress(&cinfo);
  RgbImage& image = job->image;
  image.width = cinfo.output_width;
  image.height = cinfo.output_height;
  image.pixels.resize(static_cast<size_t>(image.width * image.height * 3));
  job->row.resize(static_cast<size_t>(image.width) * 4);
  const uint8_t* row = job->row.data();
  // An Adobe APP14 marker means PIL reads the CMYK as inverted ("CMYK;I").
  const bool inverted = cmyk && cinfo.saw_Adobe_marker;
  while (cinfo.output_scanline < cinfo.output_height) {
    uint8_t* out = image.pixels.data() + static_cast<size_t>(cinfo.output_scanline) * image.width * 3;
    JSAMPROW dest = cmyk ? job->row.data() : out;
    jpeg_read_scanlines(&cinfo, &dest, 1);
    if (cmyk) {
      for (int64_t x = 0; x < image.width; ++x) {
        int c[4];
        for (int k = 0; k < 4; ++k) c[k] = inverted ? 255 - row[x * 4 + k] : row[x * 4 + k];
        const int nk = 255 - c[3];
        for (int k = 0; k < 3; ++k) out[x * 3 + k] = Cmyk(c[k], nk);
      }
    }
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

Expected<RgbImage> DecodeJpeg(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  JpegJob job;
  job.bytes = bytes;
  job.limits = &limits;
  if (!DecodeJpegInto(&job)) return InvalidArgument(job.failure);
  return ApplyExifOrientation(std::move(job.image), ExifOrientation(job.exif));
}

// ---------------------------------------------------------------------------------------------
// PNG

struct PngReader {
  std::span<const uint8_t> bytes;
  size_t offset = 0;
  std::string failure;
};

void PngRead(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (n > r->bytes.size() - r->offset) png_error(png, "the PNG data ends before the image is complete (truncated)");
  std::memcpy(out, r->bytes.data() + r->offset, n);
  r->offset += n;
}
void PngError(png_structp png, png_const_charp message) {
  auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
  if (r->failure.empty()) SetFailure(&r->failure, message);
  png_longjmp(png, 1);
}
void PngWarning(png_structp, png_const_charp) {}

// As JpegJob: the caller owns everything; DecodePngInto's frame holds only C state.
struct PngJob {
  PngReader reader;
  const MediaLimits* limits = nullptr;
  RgbImage image;
  std::vector<uint8_t> rgba;
  std::vector<png_bytep> rows;
  std::vector<uint8_t> exif;
  bool alpha = false;
};

bool DecodePngInto(PngJob* job) {
  PngReader* reader = &job->reader;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, reader, PngError, PngWarning);
  if (png == nullptr) {
    SetFailure(&reader->failure, "png_create_read_struct failed");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    SetFailure(&reader->failure, "png_create_info_struct failed");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    PrefixFailure(&reader->failure, "the PNG image is corrupt: ", "unknown error");
    return false;
  }
  png_set_read_fn(png, reader, PngRead);
  // libpng's own limits as a second line: the dimension check below is the one that reports.
  png_set_user_limits(png, static_cast<png_uint_32>(job->limits->max_image_side),
                      static_cast<png_uint_32>(job->limits->max_image_side));
  png_set_chunk_malloc_max(png, 64u << 20);
  png_read_info(png, info);
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0, interlace = 0;
  png_get_IHDR(png, info, &width, &height, &bit_depth, &color_type, &interlace, nullptr, nullptr);
  if (Failed(CheckDimensions(width, height, *job->limits, "PNG"), &reader->failure)) png_longjmp(png, 1);
  job->alpha = (color_type & PNG_COLOR_MASK_ALPHA) != 0;
  if (png_get_valid(png, info, PNG_INFO_tRNS)) {
    png_set_tRNS_to_alpha(png);
    job->alpha = true;
  }
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (bit_depth == 16) png_set_strip_16(png);  // the high byte, as PIL's "RGB;16B" raw modes
  if (color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int channels = png_get_channels(png, info);
  if (channels != (job->alpha ? 4 : 3) || png_get_rowbytes(png, info) != size_t(width) * channels) {
    SetFailure(&reader->failure,
               fmt::format("the PNG image decodes to {} channels, expected {}", channels, job->alpha ? 4 : 3));
    png_longjmp(png, 1);
  }
  job->image.width = width;
  job->image.height = height;
  job->image.pixels.resize(size_t(width) * height * 3);
  uint8_t* target = job->image.pixels.data();
  if (job->alpha) {
    job->rgba.resize(size_t(width) * height * 4);
    target = job->rgba.data();
  }
  job->rows.resize(height);
  for (png_uint_32 y = 0; y < height; ++y) job->rows[y] = target + size_t(y) * width * channels;
  png_read_image(png, job->rows.data());
  png_read_end(png, info);
#ifdef PNG_eXIf_SUPPORTED
  png_uint_32 exif_size = 0;
  png_bytep exif_data = nullptr;
  if (png_get_eXIf_1(png, info, &exif_size, &exif_data) != 0 && exif_data != nullptr) {
    job->exif.assign(exif_data, exif_data + exif_size);
  }
#endif
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

Expected<RgbImage> DecodePng(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  PngJob job;
  job.reader.bytes = bytes;
  job.limits = &limits;
  if (!DecodePngInto(&job)) return InvalidArgument(job.reader.failure);
  if (job.alpha) CompositeOverWhite(job.rgba.data(), job.image.width * job.image.height, job.image.pixels.data());
  return ApplyExifOrientation(std::move(job.image), ExifOrientation(job.exif));
}

// ---------------------------------------------------------------------------------------------
// WebP

Expected<RgbImage> DecodeWebp(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  WebPBitstreamFeatures features;
  const VP8StatusCode status = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  if (status == VP8_STATUS_NOT_ENOUGH_DATA) return InvalidArgument("the WebP data is truncated");
  if (status != VP8_STATUS_OK) return InvalidArgument(fmt::format("the WebP header is corrupt (libwebp status {})",
                                                                  static_cast<int>(status)));
  EMBER_RETURN_IF_ERROR(CheckDimensions(features.width, features.height, limits, "WebP"));
  if (features.has_animation) return InvalidArgument("animated WebP images are not supported; send one frame");
  // The EXIF chunk of an extended (VP8X) file: RIFF chunks after the 12-byte header.
  std::span<const uint8_t> exif;
  for (size_t off = 12; off + 8 <= bytes.size();) {
    const uint32_t size = Read32(bytes.data() + off + 4, true);
    if (size > bytes.size() - off - 8) break;
    if (std::memcmp(bytes.data() + off, "EXIF", 4) == 0) exif = bytes.subspan(off + 8, size);
    off += 8 + size + (size & 1);
  }
  RgbImage image;
  image.width = features.width;
  image.height = features.height;
  image.pixels.resize(size_t(image.width) * image.height * 3);
  if (features.has_alpha) {
    std::vector<uint8_t> rgba(size_t(image.width) * image.height * 4);
    if (WebPDecodeRGBAInto(bytes.data(), bytes.size(), rgba.data(), rgba.size(), int(image.width) * 4) == nullptr) {
      return InvalidArgument("the WebP image data is corrupt or truncated");
    }
    CompositeOverWhite(rgba.data(), image.width * image.height, image.pixels.data());
  } else if (WebPDecodeRGBInto(bytes.data(), bytes.size(), image.pixels.data(), image.pixels.size(),
                               int(image.width) * 3) == nullptr) {
    return InvalidArgument("the WebP image data is corrupt or truncated");
  }
  return ApplyExifOrientation(std::move(image), ExifOrientation(exif));
}

}  // namespace

// ---------------------------------------------------------------------------------------------

int ExifOrientation(std::span<const uint8_t> exif) {
  if (exif.size() >= 6 && std::memcmp(exif.data(), "Exif\0\0", 6) == 0) exif = exif.subspan(6);
  if (exif.size() < 8) return 1;
  const uint8_t* p = exif.data();
  bool little;
  if (p[0] == 'I' && p[1] == 'I') {
    little = true;
  } else if (p[0] == 'M' && p[1] == 'M') {
    little = false;
  } else {
    return 1;
  }
  if (Read16(p + 2, little) != 42) return 1;
  const uint32_t ifd = Read32(p + 4, little);
  if (ifd > exif.size() - 2) return 1;
  const uint32_t count = Read16(p + ifd, little);
  for (uint32_t i = 0; i < count; ++i) {
    const size_t entry = size_t(ifd) + 2 + size_t(i) * 12;
    if (entry + 12 > exif.size()) return 1;
    if (Read16(p + entry, little) != 0x0112) continue;
    const uint16_t type = Read16(p + entry + 2, little);
    int value = 1;
    if (type == 3) value = Read16(p + entry + 8, little);        // SHORT
    else if (type == 4) value = int(Read32(p + entry + 8, little));  // LONG
    return value >= 1 && value <= 8 ? value : 1;
  }
  return 1;
}

RgbImage ApplyExifOrientation(RgbImage in, int orientation) {
  if (orientation < 2 || orientation > 8) return in;
  const int64_t w = in.width, h = in.height;
  const bool swap = orientation >= 5;  // transpose, rotate 270, transverse, rotate 90
  RgbImage out;
  out.width = swap ? h : w;
  out.height = swap ? w : h;
  out.pixels.resize(in.pixels.size());
  for (int64_t y = 0; y < out.height; ++y) {
    for (int64_t x = 0; x < out.width; ++x) {
      int64_t sy = 0, sx = 0;  // source row and column (PIL's Image.transpose methods)
      switch (orientation) {
        case 2: sy = y; sx = w - 1 - x; break;           // FLIP_LEFT_RIGHT
        case 3: sy = h - 1 - y; sx = w - 1 - x; break;   // ROTATE_180
        case 4: sy = h - 1 - y; sx = x; break;           // FLIP_TOP_BOTTOM
        case 5: sy = x; sx = y; break;                   // TRANSPOSE
        case 6: sy = h - 1 - x; sx = y; break;           // ROTATE_270 (90 clockwise)
        case 7: sy = h - 1 - x; sx = w - 1 - y; break;   // TRANSVERSE
        case 8: sy = x; sx = w - 1 - y; break;           // ROTATE_90 (90 counter-clockwise)
      }
      std::memcpy(&out.pixels[(y * out.width + x) * 3], &in.pixels[(sy * w + sx) * 3], 3);
    }
  }
  return out;
}

void CompositeOverWhite(const uint8_t* rgba, int64_t num_pixels, uint8_t* rgb) {
  // Pillow's AlphaComposite.c with dst = opaque white: 7 extra bits of precision, rounded /255.
  constexpr uint32_t kPrecisionBits = 7;
  for (int64_t i = 0; i < num_pixels; ++i) {
    const uint8_t* s = rgba + i * 4;
    uint8_t* d = rgb + i * 3;
    const uint32_t a = s[3];
    if (a == 0) {
      d[0] = d[1] = d[2] = 255;
      continue;
    }
    const uint32_t blend = 255 * (255 - a);
    const uint32_t outa255 = a * 255 + blend;
    const uint32_t coef1 = a * 255 * 255 * (1u << kPrecisionBits) / outa255;
    const uint32_t coef2 = 255 * (1u << kPrecisionBits) - coef1;
    for (int c = 0; c < 3; ++c) {
      const uint32_t tmp = s[c] * coef1 + 255 * coef2 + (0x80u << kPrecisionBits);
      d[c] = static_cast<uint8_t>(((tmp >> 8) + tmp) >> 8 >> kPrecisionBits);
    }
  }
}

Expected<RgbImage> DecodeImage(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  EMBER_RETURN_IF_ERROR(CheckEncodedSize(bytes, limits, "image"));
  const MediaKind kind = SniffMediaKind(bytes);
  switch (kind) {
    case MediaKind::kJpeg: return DecodeJpeg(bytes, limits);
    case MediaKind::kPng: return DecodePng(bytes, limits);
    case MediaKind::kWebp: return DecodeWebp(bytes, limits);
    case MediaKind::kUnknown:
      return InvalidArgument("the image is not JPEG, PNG or WebP (no known signature in its first bytes)");
    default:
      return InvalidArgument(fmt::format("the image is {}; only JPEG, PNG and WebP images are supported",
                                         MediaKindName(kind)));
  }
}

}  // namespace ember::media
