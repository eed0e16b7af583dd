#include "server/guard.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace dg::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_ip_address(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

std::string bearer_token(std::string_view authorization) {
  authorization = trim(authorization);
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() || lower(authorization.substr(0, kScheme.size())) != kScheme ||
      (authorization[kScheme.size()] != ' ' && authorization[kScheme.size()] != '\t'))
    return {};
  return std::string(trim(authorization.substr(kScheme.size())));
}

std::string host_name(std::string_view authority) {
  authority = trim(authority);
  if (!authority.empty() && authority.front() == '[') {
    const size_t end = authority.find(']');
    return end == std::string_view::npos ? std::string() : lower(authority.substr(1, end - 1));
  }
  const size_t colon = authority.find(':');
  if (colon != std::string_view::npos && authority.find(':', colon + 1) == std::string_view::npos)
    authority = authority.substr(0, colon);
  return lower(authority);
}

bool host_allowed(std::string_view host_header, const std::vector<std::string>& allowed) {
  if (trim(host_header).empty()) return true;
  const std::string host = host_name(host_header);
  if (host == "localhost" || is_ip_address(host)) return true;
  return std::any_of(allowed.begin(), allowed.end(),
                     [&](const std::string& a) { return a == "*" || lower(a) == host; });
}

bool origin_allowed(std::string_view origin, std::string_view host_header) {
  origin = trim(origin);
  if (origin.empty()) return true;
  const size_t scheme = origin.find("://");
  if (scheme == std::string_view::npos) return false;  // "null" (a sandboxed page, a file) included
  return lower(origin.substr(scheme + 3)) == lower(trim(host_header));
}

bool is_json_content_type(std::string_view content_type) {
  return lower(trim(content_type.substr(0, content_type.find(';')))) == "application/json";
}

}  // namespace dg::server
