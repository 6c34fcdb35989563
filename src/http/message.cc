#include "http/message.h"

#include <algorithm>

namespace ember::http {
namespace {
char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string Find(const std::vector<std::pair<std::string, std::string>>& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (HeaderNameEquals(key, name)) return value;
  }
  return "";
}
}  // namespace

bool HeaderNameEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return Lower(x) == Lower(y);
         });
}

std::string HttpRequest::header(std::string_view name) const { return Find(headers, name); }

std::string HttpResponse::header(std::string_view name) const { return Find(headers, name); }

void HttpResponse::set_header(std::string name, std::string value) {
  std::erase_if(headers, [&](const auto& h) { return HeaderNameEquals(h.first, name); });
  headers.emplace_back(std::move(name), std::move(value));
}

void HttpResponse::set_content(std::string content, std::string type) {
  body = std::move(content);
  content_type = std::move(type);
}

}  // namespace ember::http
