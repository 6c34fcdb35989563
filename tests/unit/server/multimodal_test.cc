// The frontend's multimodal pieces that need no model: media URLs (data: and file://, with the
// attacks a client would try), base64, content-part shapes, and what templates see of media parts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/multimodal/media_source.h"
#include "server/protocol/requests.h"
#include "server/routes/chat_prompt.h"

namespace ember::server {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

std::vector<uint8_t> Ok(std::variant<std::vector<uint8_t>, ApiError> r) {
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << e->message;
  return std::holds_alternative<std::vector<uint8_t>>(r) ? std::get<std::vector<uint8_t>>(r) : std::vector<uint8_t>{};
}

std::string Err(std::variant<std::vector<uint8_t>, ApiError> r) {
  if (!std::holds_alternative<ApiError>(r)) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  EXPECT_EQ(std::get<ApiError>(r).http_status, 400);
  return std::get<ApiError>(r).message;
}

TEST(MediaSource, Base64IsStrict) {
  std::vector<uint8_t> out;
  ASSERT_TRUE(DecodeBase64("aGVsbG8=", 100, &out));
  EXPECT_EQ(std::string(out.begin(), out.end()), "hello");
  ASSERT_TRUE(DecodeBase64("aGVsbG8", 100, &out));  // padding optional
  EXPECT_EQ(out.size(), 5u);
  ASSERT_TRUE(DecodeBase64("", 100, &out));
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(DecodeBase64("aGVs bG8=", 100, &out));  // whitespace
  EXPECT_FALSE(DecodeBase64("aGVsbG8==", 100, &out));  // too much padding
  EXPECT_FALSE(DecodeBase64("a", 100, &out));          // not a whole byte
  EXPECT_FALSE(DecodeBase64("aGVsbG8-", 100, &out));   // base64url is not base64
  EXPECT_FALSE(DecodeBase64("aGVsbG8=", 4, &out));     // over the limit
}

TEST(MediaSource, DataUrls) {
  MediaAccess access;
  access.max_media_bytes = 8;
  EXPECT_EQ(Ok(FetchMedia("data:image/png;base64,aGVsbG8=", access, "f")).size(), 5u);
  EXPECT_NE(Err(FetchMedia("data:image/png;base64,aGVsbG8gd29ybGQ=", access, "f")).find("--max-media-bytes"),
            std::string::npos);
  EXPECT_NE(Err(FetchMedia("data:image/png,hello", access, "f")).find("only base64"), std::string::npos);
  EXPECT_NE(Err(FetchMedia("data:image/png;base64", access, "f")).find("','"), std::string::npos);
  EXPECT_NE(Err(FetchMedia("data:image/png;base64,", access, "f")).find("is empty"), std::string::npos);
  EXPECT_NE(Err(FetchMedia("data:image/png;base64,!!!!", access, "f")).find("not valid base64"), std::string::npos);
  EXPECT_NE(Err(FetchMedia("https://example.com/x.png", access, "f")).find("remote"), std::string::npos);
  EXPECT_NE(Err(FetchMedia("ftp://x", access, "f")).find("data: URL"), std::string::npos);
  // The field the error names is the content part's.
  const auto r = FetchMedia("nope", access, "messages[2].content[1]");
  EXPECT_NE(std::get<ApiError>(r).message.find("messages[2].content[1]"), std::string::npos);
}

TEST(MediaSource, LocalFilesOnlyUnderTheAllowedDirectory) {
  const fs::path root = fs::temp_directory_path() / ("ember_media_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "allowed");
  fs::create_directories(root / "allowed_sibling");
  auto write = [](const fs::path& p, const std::string& text) { std::ofstream(p) << text; };
  write(root / "allowed" / "a.png", "abc");
  write(root / "allowed_sibling" / "b.png", "abc");
  write(root / "secret.txt", "secret");
  fs::create_symlink(root / "secret.txt", root / "allowed" / "link.png");
  write(root / "allowed" / "empty.png", "");

  MediaAccess access;
  EXPECT_NE(Err(FetchMedia("file://" + (root / "allowed" / "a.png").string(), access, "f")).find("--allowed-local"),
            std::string::npos);  // none allowed by default
  access.allowed_local_media_path = (root / "allowed").string();
  EXPECT_EQ(Ok(FetchMedia("file://" + (root / "allowed" / "a.png").string(), access, "f")).size(), 3u);
  for (const fs::path& outside : {root / "secret.txt", root / "allowed" / "link.png",
                                  root / "allowed" / ".." / "secret.txt", root / "allowed_sibling" / "b.png",
                                  root / "allowed" / "missing.png", root / "allowed"}) {
    EXPECT_NE(Err(FetchMedia("file://" + outside.string(), access, "f")).find("not a readable file"), std::string::npos)
        << outside;
  }
  EXPECT_NE(Err(FetchMedia("file://relative/a.png", access, "f")).find("absolute"), std::string::npos);
  EXPECT_NE(Err(FetchMedia("file://" + (root / "allowed" / "empty.png").string(), access, "f")).find("empty"),
            std::string::npos);
  access.max_media_bytes = 2;
  EXPECT_NE(Err(FetchMedia("file://" + (root / "allowed" / "a.png").string(), access, "f")).find("--max-media-bytes"),
            std::string::npos);
  fs::remove_all(root);
}

TEST(ContentParts, MediaPartsParseAndMalformedOnesAreRefused) {
  const SamplingParams defaults;
  const json ok = json::parse(R"({"messages": [{"role": "user", "content": [
      {"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "data:x"}},
      {"type": "image_url", "image_url": "data:x"}, {"type": "video_url", "video_url": {"url": "data:x"}},
      {"type": "audio_url", "audio_url": {"url": "data:x"}},
      {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}],
      "mm_processor_kwargs": {"use_audio_in_video": true}})");
  const auto parsed = ParseChatCompletionRequest(ok, defaults);
  ASSERT_TRUE(std::holds_alternative<ChatCompletionRequest>(parsed)) << std::get<ApiError>(parsed).message;
  EXPECT_TRUE(std::get<ChatCompletionRequest>(parsed).use_audio_in_video);
  for (const char* bad : {
           R"([{"type": "image_url"}])", R"([{"type": "image_url", "image_url": {"url": 5}}])",
           R"([{"type": "input_audio", "input_audio": {"format": "wav"}}])",
           R"([{"type": "input_audio", "input_audio": {"data": "AAAA", "format": 3}}])",
           R"([{"type": "input_audio", "input_audio": "AAAA"}])", R"([{"type": "image", "image": "x"}])",
           R"([{"type": "text"}])", R"([5])"}) {
    json body = json::parse(R"({"messages": [{"role": "user"}]})");
    body["messages"][0]["content"] = json::parse(bad);
    const auto r = ParseChatCompletionRequest(body, defaults);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << bad;
    EXPECT_EQ(std::get<ApiError>(r).param, "messages") << bad;
  }
  for (const char* bad : {R"("yes")", R"({"fps": 2})", R"({"use_audio_in_video": 1})"}) {
    json body = json::parse(R"({"messages": [{"role": "user", "content": "x"}]})");
    body["mm_processor_kwargs"] = json::parse(bad);
    const auto r = ParseChatCompletionRequest(body, defaults);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << bad;
    EXPECT_EQ(std::get<ApiError>(r).param, "mm_processor_kwargs") << bad;
  }
}

TEST(ContentParts, TemplatesSeeMediaPartsAsVllmGivesThem) {
  const json content = json::parse(R"([{"type": "text", "text": "a"},
      {"type": "image_url", "image_url": {"url": "data:x"}}, {"type": "input_audio", "input_audio": {"data": "A"}},
      {"type": "text", "text": "b"}])");
  EXPECT_EQ(TemplateContent(content, /*wants_parts=*/true, nullptr),
            json::parse(R"([{"type": "text", "text": "a"}, {"type": "image"}, {"type": "audio"},
                            {"type": "text", "text": "b"}])"));
  // Joined for templates that take strings (media dropped without a processor: refused before).
  EXPECT_EQ(TemplateContent(content, /*wants_parts=*/false, nullptr), "a\nb");
}

}  // namespace
}  // namespace ember::server
