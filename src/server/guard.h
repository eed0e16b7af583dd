// What a request must show before any route runs, as pure functions of its headers: the API key (the Bearer scheme,
// any case), the Host it was sent to (DNS rebinding: a web page whose name resolves to this server sends its own
// name), the Origin of a browser page (cross-site requests), and a JSON content type (a page can send a form or
// text/plain cross-site without asking first). docs/SERVER.md, "Security".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dg::server {

// The token of an "Authorization: Bearer TOKEN" header (the scheme in any case); "" when there is none.
std::string bearer_token(std::string_view authorization);

// The host of a Host header or URL authority: "[::1]:8080" -> "::1", "Example.COM:80" -> "example.com".
std::string host_name(std::string_view authority);

// A Host header this server answers to: an IP address (a DNS-rebinding page cannot send one), `localhost`, or a
// name in `allowed` ("*" allows any). An absent Host (HTTP/1.0) is allowed.
bool host_allowed(std::string_view host_header, const std::vector<std::string>& allowed);

// An Origin header is allowed only when absent or the server's own (scheme://HOST equal to the Host header): the
// server serves no pages, so any other origin is a page of another site.
bool origin_allowed(std::string_view origin, std::string_view host_header);

// Content-Type application/json (parameters such as charset allowed, any case).
bool is_json_content_type(std::string_view content_type);

}  // namespace dg::server
