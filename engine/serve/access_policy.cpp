#include "serve/access_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace specula::serve {

namespace {

bool is_ip_literal(const std::string& name) {
  unsigned char buffer[16];
  return ::inet_pton(AF_INET, name.c_str(), buffer) == 1 || ::inet_pton(AF_INET6, name.c_str(), buffer) == 1;
}

bool listed(const std::vector<std::string>& list, const std::string& value) {
  return std::any_of(list.begin(), list.end(), [&](const std::string& item) { return item == "*" || ascii_lower(item) == value; });
}

}  // namespace

std::string host_name(std::string_view value) {
  std::string_view name = value;
  if (!name.empty() && name.front() == '[') {  // [v6]:port
    const size_t close = name.find(']');
    if (close == std::string_view::npos) return {};
    const std::string_view rest = name.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return {};
    name = name.substr(1, close - 1);
  } else {
    const size_t colon = name.find(':');
    if (colon != std::string_view::npos) {
      const std::string_view port = name.substr(colon + 1);
      if (!std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) return {};
      name = name.substr(0, colon);
    }
  }
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);  // "localhost." is localhost
  const bool bracketed = !value.empty() && value.front() == '[';
  const bool valid = !name.empty() && std::all_of(name.begin(), name.end(), [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' || (bracketed && c == ':');
  });
  return valid ? ascii_lower(name) : std::string();
}

std::optional<AccessRefusal> check_host(const HttpRequest& head, const AccessPolicy& policy) {
  const std::string* value = head.header("host");
  if (!value) return std::nullopt;  // HTTP/1.0; an HTTP/1.1 request without Host never gets here
  const std::string name = host_name(*value);
  if (name.empty()) return AccessRefusal{400, "the Host header is malformed"};
  const bool local_name = name == "localhost" || (name.size() > 10 && name.ends_with(".localhost"));
  if (is_ip_literal(name) || local_name || name == ascii_lower(policy.bound_host) || listed(policy.allowed_hosts, name)) {
    return std::nullopt;
  }
  return AccessRefusal{403, "this server does not answer to the host name '" + name +
                                "' (a page that rebinds a name to this machine would send it): start the server with "
                                "--allowed-host " + name + " to allow it"};
}

std::optional<AccessRefusal> check_origin(const HttpRequest& head, const AccessPolicy& policy) {
  const std::string* origin = head.header("origin");
  if (!origin || listed(policy.allowed_origins, ascii_lower(*origin))) return std::nullopt;
  return AccessRefusal{403, "requests from web pages of origin '" + *origin +
                                "' are refused: start the server with --allowed-origin " + *origin +
                                " to let that page use it"};
}

std::string allowed_origin(const HttpRequest& head, const AccessPolicy& policy) {
  const std::string* origin = head.header("origin");
  return origin && listed(policy.allowed_origins, ascii_lower(*origin)) ? *origin : std::string();
}

bool is_json_body(const HttpRequest& head) {
  const std::string* type = head.header("content-type");
  if (!type) return false;
  std::string media = ascii_lower(type->substr(0, type->find(';')));
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.pop_back();
  return media == "application/json";
}

}  // namespace specula::serve
