// Readers for the fixtures scripts/make_tokenizer_corpus.py writes to testdata/ (formats in that
// script's docstring). They are gzip files; a small inflater (RFC 1951/1952) lives here so that
// the tests need neither zlib nor Python.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/source_dir.h"
#include "tokenizer/tokenizer.h"

namespace ember::tokenizer_testing {

inline std::string FixturePath(const std::string& name) {
  return std::string(EMBER_SOURCE_DIR) + "/tests/unit/tokenizer/testdata/" + name;
}

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Inflate, after Mark Adler's description in RFC 1951: canonical Huffman codes decoded a bit at
// a time (slow but short; the fixtures are a few MB).
class Inflater {
 public:
  Inflater(const uint8_t* data, size_t size) : in_(data), size_(size) {}

  std::string Run() {
    int last = 0;
    while (!last) {
      last = Bits(1);
      const int type = Bits(2);
      if (type == 0) {
        Stored();
      } else if (type == 1) {
        Fixed();
      } else if (type == 2) {
        Dynamic();
      } else {
        throw std::runtime_error("inflate: bad block type");
      }
    }
    return out_;
  }
  size_t consumed() const { return pos_; }

 private:
  struct Huffman {
    std::array<int, 16> count{};
    std::vector<int> symbol;
  };

  int Bits(int need) {
    uint32_t value = bitbuf_;
    while (bitcnt_ < need) {
      if (pos_ >= size_) throw std::runtime_error("inflate: out of input");
      value |= static_cast<uint32_t>(in_[pos_++]) << bitcnt_;
      bitcnt_ += 8;
    }
    bitbuf_ = value >> need;
    bitcnt_ -= need;
    return static_cast<int>(value & ((1u << need) - 1));
  }

  static Huffman Build(const int* lengths, int n) {
    Huffman h;
    h.symbol.assign(n, 0);
    for (int i = 0; i < n; ++i) h.count[lengths[i]]++;
    h.count[0] = 0;
    std::array<int, 16> offset{};
    for (int len = 1; len < 15; ++len) offset[len + 1] = offset[len] + h.count[len];
    for (int i = 0; i < n; ++i) {
      if (lengths[i] != 0) h.symbol[offset[lengths[i]]++] = i;
    }
    return h;
  }

  int Decode(const Huffman& h) {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len <= 15; ++len) {
      code |= Bits(1);
      const int count = h.count[len];
      if (code - count < first) return h.symbol[index + (code - first)];
      index += count;
      first = (first + count) << 1;
      code <<= 1;
    }
    throw std::runtime_error("inflate: bad code");
  }

  void Stored() {
    bitbuf_ = 0;
    bitcnt_ = 0;
    if (pos_ + 4 > size_) throw std::runtime_error("inflate: truncated stored block");
    const unsigned len = in_[pos_] | (in_[pos_ + 1] << 8);
    pos_ += 4;
    if (pos_ + len > size_) throw std::runtime_error("inflate: truncated stored block");
    out_.append(reinterpret_cast<const char*>(in_ + pos_), len);
    pos_ += len;
  }

  void Codes(const Huffman& lit, const Huffman& dist) {
    static constexpr int kLenBase[] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27,
                                       31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    static constexpr int kLenExtra[] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                        2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
    static constexpr int kDistBase[] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129,
                                        193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
                                        6145, 8193, 12289, 16385, 24577};
    static constexpr int kDistExtra[] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6,
                                         6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
    for (;;) {
      int sym = Decode(lit);
      if (sym < 256) {
        out_.push_back(static_cast<char>(sym));
      } else if (sym == 256) {
        return;
      } else {
        sym -= 257;
        if (sym >= 29) throw std::runtime_error("inflate: bad length");
        const int len = kLenBase[sym] + Bits(kLenExtra[sym]);
        const int d = Decode(dist);
        if (d >= 30) throw std::runtime_error("inflate: bad distance");
        const size_t back = kDistBase[d] + Bits(kDistExtra[d]);
        if (back > out_.size()) throw std::runtime_error("inflate: distance too far");
        for (int i = 0; i < len; ++i) out_.push_back(out_[out_.size() - back]);
      }
    }
  }

  void Fixed() {
    int lengths[288 + 30];
    for (int i = 0; i < 144; ++i) lengths[i] = 8;
    for (int i = 144; i < 256; ++i) lengths[i] = 9;
    for (int i = 256; i < 280; ++i) lengths[i] = 7;
    for (int i = 280; i < 288; ++i) lengths[i] = 8;
    for (int i = 288; i < 318; ++i) lengths[i] = 5;
    Codes(Build(lengths, 288), Build(lengths + 288, 30));
  }

  void Dynamic() {
    static constexpr int kOrder[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    const int nlen = Bits(5) + 257;
    const int ndist = Bits(5) + 1;
    const int ncode = Bits(4) + 4;
    int lengths[320] = {};
    for (int i = 0; i < ncode; ++i) lengths[kOrder[i]] = Bits(3);
    const Huffman lencode = Build(lengths, 19);
    int index = 0;
    while (index < nlen + ndist) {
      int sym = Decode(lencode);
      if (sym < 16) {
        lengths[index++] = sym;
        continue;
      }
      int value = 0, repeat = 0;
      if (sym == 16) {
        if (index == 0) throw std::runtime_error("inflate: repeat with no previous length");
        value = lengths[index - 1];
        repeat = 3 + Bits(2);
      } else if (sym == 17) {
        repeat = 3 + Bits(3);
      } else {
        repeat = 11 + Bits(7);
      }
      if (index + repeat > nlen + ndist) throw std::runtime_error("inflate: too many lengths");
      while (repeat--) lengths[index++] = value;
    }
    Codes(Build(lengths, nlen), Build(lengths + nlen, ndist));
  }

  const uint8_t* in_;
  size_t size_;
  size_t pos_ = 0;
  uint32_t bitbuf_ = 0;
  int bitcnt_ = 0;
  std::string out_;
};

inline uint32_t Crc32(const std::string& data) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char ch : data) crc = table[(crc ^ ch) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

// One gzip member (what Python's gzip.compress writes), checked against its CRC-32 and size.
inline std::string Gunzip(const std::string& gz) {
  const auto* p = reinterpret_cast<const uint8_t*>(gz.data());
  if (gz.size() < 18 || p[0] != 0x1F || p[1] != 0x8B || p[2] != 8) {
    throw std::runtime_error("not a gzip file");
  }
  const uint8_t flags = p[3];
  size_t pos = 10;
  if (flags & 4) pos += 2 + (p[pos] | (p[pos + 1] << 8));
  if (flags & 8) pos = gz.find('\0', pos) + 1;
  if (flags & 16) pos = gz.find('\0', pos) + 1;
  if (flags & 2) pos += 2;
  Inflater inflater(p + pos, gz.size() - pos);
  std::string out = inflater.Run();
  const size_t trailer = pos + inflater.consumed();
  if (trailer + 8 > gz.size()) throw std::runtime_error("gzip: no trailer");
  uint32_t crc = 0, isize = 0;
  std::memcpy(&crc, p + trailer, 4);
  std::memcpy(&isize, p + trailer + 4, 4);
  if (crc != Crc32(out) || isize != static_cast<uint32_t>(out.size())) {
    throw std::runtime_error("gzip: CRC or size mismatch");
  }
  return out;
}

class ByteReader {
 public:
  ByteReader(std::string data, const std::string& magic) : data_(std::move(data)) {
    if (data_.compare(0, magic.size(), magic) != 0) throw std::runtime_error("bad magic " + magic);
    pos_ = magic.size();
  }
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (pos_ >= data_.size()) throw std::runtime_error("fixture truncated");
      const auto b = static_cast<uint8_t>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
  }
  std::string Blob() {
    const size_t n = Varint();
    if (pos_ + n > data_.size()) throw std::runtime_error("fixture truncated");
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  uint8_t Byte() { return static_cast<uint8_t>(data_.at(pos_++)); }
  float Float() {
    float f;
    std::memcpy(&f, data_.data() + pos_, 4);
    pos_ += 4;
    return f;
  }
  bool AtEnd() const { return pos_ == data_.size(); }

 private:
  std::string data_;
  size_t pos_ = 0;
};

inline std::vector<std::string> ReadRecords(const std::string& name) {
  ByteReader r(Gunzip(ReadFileBytes(FixturePath(name))), "EMBREC1\n");
  std::vector<std::string> records(r.Varint());
  for (auto& rec : records) rec = r.Blob();
  return records;
}

// A TokenizerSpec as the GGUF's tokenizer.ggml.* keys give it.
inline TokenizerSpec ReadVocab(const std::string& name) {
  ByteReader r(Gunzip(ReadFileBytes(FixturePath(name))), "EMBVOC1\n");
  TokenizerSpec spec;
  spec.model = r.Varint() == 0 ? TokenizerSpec::Model::kBytePairGpt2
                               : TokenizerSpec::Model::kSentencePieceBpe;
  spec.pre_tokenizer = r.Blob();
  spec.bos_id = static_cast<int32_t>(r.Varint()) - 1;
  spec.eos_id = static_cast<int32_t>(r.Varint()) - 1;
  spec.unk_id = static_cast<int32_t>(r.Varint()) - 1;
  spec.pad_id = static_cast<int32_t>(r.Varint()) - 1;
  const uint64_t flags = r.Varint();
  spec.add_bos = flags & 1;
  spec.add_eos = flags & 2;
  spec.add_space_prefix = flags & 4;
  const size_t n = r.Varint();
  int64_t previous = 0;
  for (size_t i = 0; i < n; ++i) {
    spec.tokens.push_back(r.Blob());
    const uint64_t code = r.Varint();
    if (code & 1) {
      spec.scores.push_back(r.Float());
    } else {
      const uint64_t zigzag = code >> 1;
      const int64_t delta = (zigzag & 1) ? -static_cast<int64_t>((zigzag + 1) >> 1)
                                         : static_cast<int64_t>(zigzag >> 1);
      previous += delta;
      spec.scores.push_back(static_cast<float>(previous));
    }
    spec.token_types.push_back(static_cast<int32_t>(r.Varint()));
  }
  const size_t m = r.Varint();
  for (size_t i = 0; i < m; ++i) spec.merges.push_back(r.Blob());
  return spec;
}

struct ReferenceIds {
  std::vector<std::vector<int32_t>> plain;    // parse_special off
  std::vector<std::vector<int32_t>> special;  // parse_special on
};

inline ReferenceIds ReadIds(const std::string& name) {
  ByteReader r(Gunzip(ReadFileBytes(FixturePath(name))), "EMBIDS1\n");
  ReferenceIds ids;
  const size_t n = r.Varint();
  auto read_list = [&] {
    std::vector<int32_t> v(r.Varint());
    for (auto& id : v) id = static_cast<int32_t>(r.Varint());
    return v;
  };
  for (size_t i = 0; i < n; ++i) ids.plain.push_back(read_list());
  for (size_t i = 0; i < n; ++i) ids.special.push_back(r.Byte() ? read_list() : ids.plain[i]);
  return ids;
}

// Whether `s` is well-formed UTF-8 (the records the `tokenizers` API, which takes str, can encode).
inline bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    if (n == 2 && b < 0xC2) return false;
    if (n == 3 && b == 0xED && static_cast<uint8_t>(s[i + 1]) >= 0xA0) return false;
    if (n == 3 && b == 0xE0 && static_cast<uint8_t>(s[i + 1]) < 0xA0) return false;
    if (n == 4 && (b > 0xF4 || (b == 0xF0 && static_cast<uint8_t>(s[i + 1]) < 0x90))) return false;
    i += n;
  }
  return true;
}

}  // namespace ember::tokenizer_testing
