// Who may use a server: the checks that keep a web page the user happens to visit from
// driving a server on the user's machine.
//
// A browser lets any page send a "simple" cross-origin request (POST with a text/plain body,
// say) without asking the server first; it only hides the answer. And through DNS
// rebinding (a name the page's owner controls, made to resolve to 127.0.0.1), a page can even
// read the answers, but its requests then carry the page's name in their Host header. So:
// a request whose Host is a name the server does not answer to is refused; a request that
// carries an Origin (every browser's cross-origin request does, and no other client's) is
// refused unless that origin was allowed; and /v1/ takes JSON bodies only, which a page
// cannot send cross-origin without a preflight that an unlisted origin fails.
// See docs/scale-out.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/http_request.h"

namespace specula::serve {

struct AccessPolicy {
  std::string bound_host;                    // the address or name the server listens on
  std::vector<std::string> allowed_hosts;    // more names clients may use; "*": any
  std::vector<std::string> allowed_origins;  // browser origins ("https://app.example:8443"); "*": any
};

// Why a request may not be served: status and message.
struct AccessRefusal {
  int status;
  std::string message;
};

// The host name of a Host header's value, lower-cased, without port or IPv6 brackets;
// empty when the value is malformed.
std::string host_name(std::string_view host_header);

// Host: IP literals (which no rebinding can take over), localhost, the bound host and the
// allowed names pass; so does a request without Host (HTTP/1.0).
std::optional<AccessRefusal> check_host(const HttpRequest& head, const AccessPolicy& policy);
// Origin: none (not a browser), or an allowed one.
std::optional<AccessRefusal> check_origin(const HttpRequest& head, const AccessPolicy& policy);
// The Origin of a request from a browser that the policy allows; empty: none.
std::string allowed_origin(const HttpRequest& head, const AccessPolicy& policy);
// A body that is JSON: Content-Type application/json, with parameters or not.
bool is_json_body(const HttpRequest& head);

}  // namespace specula::serve
