#include "server/http_util.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace ember::server {
namespace {

// Whatever a handler throws, the client gets a generic 500 in OpenAI's shape, never the
// exception's text (which may quote the request, bytes that are not even UTF-8).
TEST(GuardHandlerTest, AnExceptionBecomesAGeneric500) {
  HttpRequest req;
  req.method = "POST";
  req.path = "/v1/\xff";
  for (int kind = 0; kind < 2; ++kind) {
    HttpResponse res;
    const bool ok = GuardHandler(req, res, [&] {
      if (kind == 0) throw std::runtime_error("secret \xff request bytes");
      throw 42;
    });
    EXPECT_FALSE(ok);
    EXPECT_EQ(res.status, 500);
    const auto body = nlohmann::json::parse(res.body);
    EXPECT_EQ(body["error"]["type"], "internal_error");
    EXPECT_EQ(res.body.find("secret"), std::string::npos) << res.body;
  }
  HttpResponse res;
  EXPECT_TRUE(GuardHandler(req, res, [&] { res.status = 204; }));
  EXPECT_EQ(res.status, 204);
}

}  // namespace
}  // namespace ember::server
