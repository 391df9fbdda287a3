#include "server/coordinator/dashboard_server.h"

#include <httplib.h>

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/content_store.h"
#include "common/env.h"
#include "common/grpc/security.h"
#include "server/coordinator/dashboard_assets.h"
#include "server/coordinator/dashboard_json.h"

namespace gradsync {
namespace {

constexpr char kJson[] = "application/json";
constexpr char kHtml[] = "text/html; charset=utf-8";

constexpr char kUnauthorizedPage[] =
    "<!doctype html><title>gradsync dashboard</title>"
    "<p>The dashboard needs the cluster token: open it as "
    "<code>http://HOST:PORT/?token=TOKEN</code> once (a cookie keeps you "
    "signed in), or send <code>Authorization: Bearer TOKEN</code>. See "
    "docs/operations.md, Dashboard.</p>";

// The value of cookie `name` in a Cookie header ("a=1; b=2"), or "".
std::string CookieOf(const httplib::Request& req, absl::string_view name) {
  const std::string header = req.get_header_value("Cookie");
  for (absl::string_view part : absl::StrSplit(header, ';')) {
    part = absl::StripAsciiWhitespace(part);
    if (absl::ConsumePrefix(&part, name) && absl::ConsumePrefix(&part, "=")) {
      return std::string(part);
    }
  }
  return "";
}

void Refuse(const httplib::Request& req, httplib::Response& res) {
  res.status = 401;
  res.set_header("WWW-Authenticate", "Bearer realm=\"gradsync\"");
  res.set_header("Cache-Control", "no-store");
  if (absl::StartsWith(req.path, "/api/")) {
    res.set_content(absl::StrCat("{\"error\":", JsonQuote(kRefusalMessage), "}"), kJson);
  } else {
    res.set_content(kUnauthorizedPage, kHtml);
  }
}

void ServeAsset(absl::string_view name, httplib::Response& res) {
  const DashboardAsset* a = FindDashboardAsset(name);
  if (a == nullptr) {
    res.status = 404;
    return;
  }
  res.set_content(reinterpret_cast<const char*>(a->data), a->size,
                  DashboardContentType(name));
  res.set_header("Cache-Control", "no-cache");
}

void ServeJson(std::string body, httplib::Response& res) {
  res.set_header("Cache-Control", "no-store");
  res.set_content(std::move(body), kJson);
}

}  // namespace

const char* DashboardContentType(absl::string_view name) {
  if (absl::EndsWith(name, ".html")) return kHtml;
  if (absl::EndsWith(name, ".js")) return "text/javascript; charset=utf-8";
  if (absl::EndsWith(name, ".css")) return "text/css; charset=utf-8";
  return "application/octet-stream";
}

std::string DashboardCookieValue(absl::string_view token) {
  return Sha256Hex(absl::StrCat("gradsync-dashboard\n", token));
}

DashboardServer::DashboardServer(DashboardSource* source, DashboardOptions options)
    : source_(source),
      options_(std::move(options)),
      cookie_value_(DashboardCookieValue(options_.token)) {}

DashboardServer::~DashboardServer() { Stop(); }

absl::StatusOr<std::string> DashboardServer::Start(const std::string& listen,
                                                   absl::Time deadline) {
  listener_ = std::make_unique<HttpListener>(kDashboardThreads, "dashboard");
  AddRoutes();
  return listener_->Start(listen, deadline);
}

void DashboardServer::Stop() {
  if (listener_ != nullptr) listener_->Stop();
}

// The auth check of the top of dashboard_server.h runs before routing, so
// no route can forget it.
void DashboardServer::AddRoutes() {
  httplib::Server* s = listener_->server();
  s->set_keep_alive_timeout(kDashboardKeepAliveSeconds);
  s->set_default_headers({
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"},
      {"Content-Security-Policy",
       "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "frame-ancestors 'none'"},
  });
  s->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    const std::string& token = options_.token;
    if (token.empty()) return R::Unhandled;
    if (req.has_param("token")) {
      if (!ConstantTimeEquals(req.get_param_value("token"), token)) {
        Refuse(req, res);
        return R::Handled;
      }
      // Only a path of this server, in characters no browser reads as
      // another host: "//host/" leaves it, and so do "/\\host/" and
      // "/<tab>/host/" (browsers take '\\' for '/' and drop tabs).
      const bool local =
          absl::StartsWith(req.path, "/") && !absl::StartsWith(req.path, "//") &&
          std::all_of(req.path.begin(), req.path.end(), [](char c) {
            return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '/' ||
                   c == '-' || c == '_' || c == '.' || c == '~';
          });
      res.status = 303;
      res.set_header("Location", local ? req.path : "/");
      res.set_header("Cache-Control", "no-store");
      res.set_header("Set-Cookie", absl::StrCat(kDashboardCookie, "=", cookie_value_,
                                                "; HttpOnly; SameSite=Strict; Path=/"));
      return R::Handled;
    }
    const std::string auth = req.get_header_value("Authorization");
    absl::string_view bearer = auth;
    if (absl::ConsumePrefix(&bearer, "Bearer ") && ConstantTimeEquals(bearer, token)) {
      return R::Unhandled;
    }
    if (ConstantTimeEquals(CookieOf(req, kDashboardCookie), cookie_value_)) {
      return R::Unhandled;
    }
    Refuse(req, res);
    return R::Handled;
  });
  s->Get("/", [](const httplib::Request&, httplib::Response& res) {
    ServeAsset("index.html", res);
  });
  s->Get(R"(/assets/([A-Za-z0-9._-]+))",
         [](const httplib::Request& req, httplib::Response& res) {
           ServeAsset(req.matches[1].str(), res);
         });
  s->Get("/api/overview", [this](const httplib::Request&, httplib::Response& res) {
    ClusterLive cluster = source_->DashboardOverview(kDashboardEndedJobs);
    ServeJson(OverviewJson(cluster), res);
  });
  s->Get(R"(/api/jobs/([A-Za-z0-9._-]+))", [this](const httplib::Request& req,
                                                  httplib::Response& res) {
    absl::StatusOr<JobLive> job = source_->DashboardJob(req.matches[1].str());
    if (!job.ok()) {
      res.status = job.status().code() == absl::StatusCode::kNotFound ? 404 : 500;
      ServeJson(absl::StrCat("{\"error\":", JsonQuote(job.status().message()), "}"), res);
      return;
    }
    ServeJson(JobJson(*job), res);
  });
}

absl::Status StartDashboardEndpoint(DashboardServer* server, const std::string& listen) {
  if (listen.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> at =
      server->Start(listen, Env::Default()->Now() + absl::Seconds(5));
  if (!at.ok()) return at.status();
  std::cout << "dashboard at http://" << *at << "/" << std::endl;
  return absl::OkStatus();
}

}  // namespace gradsync
