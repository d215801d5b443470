// nri-qos-metrics: the node's nri-qos metrics over HTTP, for a cluster's Prometheus (issue #33
// §2). A separate, dynamically linked executable with Debian's cpp-httplib (libcpp-httplib-dev,
// which has no static library), so that neither the static hook nor the relay carries an HTTP
// server: the relay service (`nri-qos relay --socket ... --metrics-listen ADDR`) and `nri-qos
// serve-metrics` exec it as a process of its own. It shares nothing with the relay process that
// serves the runtime (no memory, no descriptor: it is started before any relay connection and
// the relay's evaluators are forked from the relay, never from it), so it neither blocks the
// ttrpc event loop nor widens the evaluators' sandbox.
//
// GET /metrics answers a snapshot read at each scrape (text format 0.0.4):
//   - the metrics textfile the hook, relay and reconcile keep (--metrics-file; records/metrics.hpp:
//     written to a temporary file and renamed, so a scrape never sees half of it), less its
//     nri_qos_build_info family if it has one;
//   - the relay service's liveness from its status file (--status-file, src/nri/service.hpp):
//     nri_qos_relay_up (1 while the service is alive and registered), nri_qos_relay_connected,
//     nri_qos_relay_reconnects_total, nri_qos_relay_start_time_seconds,
//     nri_qos_relay_last_sync_timestamp_seconds; none when there is no status file (modes in
//     which the runtime execs the hook itself);
//   - nri_qos_build_info{version,policy_sha256} 1, in every mode;
//   - nri_qos_metrics_textfile_readable 0/1 (the textfile missing before the first event is 0).
// Anything else is 404. The process drops every capability after binding (it reads 0644 files
// only) and sets no_new_privs.
//
// Usage: nri-qos-metrics --listen ADDR:PORT [--metrics-file F] [--status-file F] [--version V]
//                        [--policy-sha256 S] [--ready-fd N]
//   ADDR is a numeric IPv4 address or [IPv6] (never resolved). --ready-fd: write "ok\n" (bound)
//   or the error line there, then close it (the relay service waits for it).
// Exit status: ends on SIGTERM (its default action; it holds nothing to flush), 2 bad usage or the address cannot be bound (one line on
// stderr).
#include <httplib.h>

#include <linux/capability.h>
#include <netdb.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "nri/service.hpp"

namespace {

struct Options {
    std::string listen, metrics_file, status_file, version, policy_sha256;
    int ready_fd = -1;
};

void report_ready(int fd, const std::string& line) {
    if (fd < 0) return;
    ssize_t n = write(fd, line.data(), line.size());
    (void)n;
    close(fd);
}

// "ADDR:PORT" or "[V6]:PORT" → host, port. "" or the reason.
std::string parse_listen(const std::string& s, std::string& host, int& port) {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos || colon + 1 == s.size()) return "--listen " + s + ": want ADDRESS:PORT";
    host = s.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.empty()) return "--listen " + s + ": no address (0.0.0.0 for every IPv4 address)";
    char* end = nullptr;
    long p = std::strtol(s.c_str() + colon + 1, &end, 10);
    if (*end != '\0' || p < 1 || p > 65535) return "--listen " + s + ": the port must be 1-65535";
    port = int(p);
    return "";
}

bool read_text(const std::string& path, std::string& out) {
    std::ifstream f(path);
    if (!f) return false;
    std::stringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    return true;
}

// One scrape: the textfile (less nri_qos_build_info), the relay's liveness, build info.
std::string render(const Options& o) {
    std::string out, text;
    const bool readable = !o.metrics_file.empty() && read_text(o.metrics_file, text);
    if (readable) {
        std::istringstream in(text);
        std::string line;
        while (std::getline(in, line)) {
            if (line.rfind("nri_qos_build_info", 0) == 0 || line.rfind("# HELP nri_qos_build_info ", 0) == 0 ||
                line.rfind("# TYPE nri_qos_build_info ", 0) == 0)
                continue;
            out += line + "\n";
        }
    }
    auto gauge = [&out](const char* name, const char* type, const char* help, const std::string& value) {
        out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + value + "\n";
    };
    if (!o.status_file.empty()) {
        nlohmann::json st = nriqos::nri::read_service_status(o.status_file);
        if (st.is_object() && !st.contains("error")) {
            auto num = [&st](const char* k) { return std::to_string(st.value(k, int64_t(0))); };
            const bool up = st.value("up", false);
            gauge("nri_qos_relay_up", "gauge", "1 while the external NRI relay service is alive and registered with the runtime.",
                  up && st.value("registered", false) ? "1" : "0");
            gauge("nri_qos_relay_connected", "gauge", "1 while the relay service has a connection to the runtime's NRI socket.",
                  up && st.value("connected", false) ? "1" : "0");
            gauge("nri_qos_relay_reconnects_total", "counter", "Attempts to connect to the runtime after the first one.", num("reconnects"));
            gauge("nri_qos_relay_start_time_seconds", "gauge", "Start time of the relay service (unix seconds).", num("started"));
            gauge("nri_qos_relay_last_sync_timestamp_seconds", "gauge", "When the relay last answered a Synchronize (unix seconds; 0 never).",
                  num("last_sync"));
        } else if (st.is_object()) {
            gauge("nri_qos_relay_up", "gauge", "1 while the external NRI relay service is alive and registered with the runtime.", "0");
        }
    }
    gauge("nri_qos_metrics_textfile_readable", "gauge", "1 when the metrics textfile could be read at this scrape (none before the first event).",
          readable ? "1" : "0");
    out += "# HELP nri_qos_build_info The nri-qos build and the policy in force when the metrics server started.\n";
    out += "# TYPE nri_qos_build_info gauge\n";
    out += "nri_qos_build_info{version=\"" + nriqos::nri::prom_label(o.version) + "\",policy_sha256=\"" + nriqos::nri::prom_label(o.policy_sha256) +
           "\"} 1\n";
    return out;
}

// Every capability dropped (the files it reads are 0644), no new privileges on exec.
void drop_privileges() {
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    struct __user_cap_header_struct h {};
    struct __user_cap_data_struct d[2]{};
    h.version = _LINUX_CAPABILITY_VERSION_3;
    h.pid = 0;
    if (syscall(SYS_capset, &h, d) != 0) std::fprintf(stderr, "nri-qos-metrics: capset: %s (capabilities kept)\n", std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](std::string& dst) {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "nri-qos-metrics: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            dst = argv[++i];
        };
        std::string fd;
        if (a == "--listen") value(o.listen);
        else if (a == "--metrics-file") value(o.metrics_file);
        else if (a == "--status-file") value(o.status_file);
        else if (a == "--version") value(o.version);
        else if (a == "--policy-sha256") value(o.policy_sha256);
        else if (a == "--ready-fd") {
            value(fd);
            o.ready_fd = std::atoi(fd.c_str());
        } else {
            std::fprintf(
                stderr,
                "nri-qos-metrics: unknown argument %s (usage: nri-qos-metrics --listen ADDR:PORT [--metrics-file F] [--status-file F] [--version V] [--policy-sha256 S] [--ready-fd N])\n",
                a.c_str());
            return 2;
        }
    }
    std::string host;
    int port = 0;
    std::string why = o.listen.empty() ? "--listen ADDRESS:PORT is required" : parse_listen(o.listen, host, port);
    httplib::Server svr;
    // Two workers: a scrape is a file read; Prometheus scrapes one at a time.
    svr.new_task_queue = [] { return new httplib::ThreadPool(2); };
    svr.set_read_timeout(5, 0);
    svr.set_write_timeout(5, 0);
    svr.set_keep_alive_max_count(10);
    svr.set_payload_max_length(4096);
    // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, with which a second server
    // (another relay service on the node) would share the port silently instead of failing.
    svr.set_socket_options([](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    svr.Get("/metrics",
            [&o](const httplib::Request&, httplib::Response& res) { res.set_content(render(o), "text/plain; version=0.0.4; charset=utf-8"); });
    svr.Get("/",
            [](const httplib::Request&, httplib::Response& res) { res.set_content("nri-qos metrics: /metrics\n", "text/plain; charset=utf-8"); });
    // numeric addresses only: never resolved (getaddrinfo AI_NUMERICHOST | AI_NUMERICSERV)
    if (why.empty() && !svr.bind_to_port(host, port, AI_NUMERICHOST | AI_NUMERICSERV))
        why = "cannot listen on " + o.listen + ": " + (errno ? std::strerror(errno) : "not a numeric address");
    if (!why.empty()) {
        std::fprintf(stderr, "nri-qos-metrics: %s\n", why.c_str());
        report_ready(o.ready_fd, why + "\n");
        return 2;
    }
    drop_privileges();
    signal(SIGPIPE, SIG_IGN);  // a scraper gone mid-answer; SIGTERM ends the process (default action)
    report_ready(o.ready_fd, "ok\n");
    svr.listen_after_bind();
    return 0;
}
