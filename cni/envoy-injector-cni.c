/*
 * envoy-injector-cni: the chained CNI plugin of capture in CNI mode
 * (docs/design.md §11, "CNI mode"). A static executable with no dependency,
 * so that it runs on any node, Node.js or not: it decides nothing itself. It
 * hands the runtime's request (the CNI_* environment and the network
 * configuration on stdin) to the node agent over a Unix socket and relays the
 * agent's answer (an exit code, then what goes to stdout).
 *
 * Build: gcc -static -Os -o envoy-injector-cni cni/envoy-injector-cni.c
 *
 * The socket's path is the configuration's "agentSocket" (the agent writes it
 * into its entry of the chain). Request: one "NAME=value" line per CNI_*
 * variable, an empty line, then stdin as received; the shim then shuts its
 * side. Answer: the exit code in decimal, a newline, then stdout's bytes.
 * Without an answer within TIMEOUT_SECONDS: ADD fails with CNI error 11 (try
 * again later), so a Pod never starts uncaptured; CHECK succeeds. VERSION and
 * DEL are answered here: DEL always succeeds (teardown below), so a teardown
 * never sticks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define TIMEOUT_SECONDS 10
#define MAX_CONFIG (1 << 20)
#define MAX_ANSWER (4 << 20)

static const char *const VARIABLES[] = {"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH"};

/* The string value of "key" in the JSON text, when it holds no escape (the agent writes plain paths); else "". */
static void json_string(const char *json, const char *key, char *out, size_t size) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\"", key);
  out[0] = '\0';
  const char *at = strstr(json, pattern);
  if (at == NULL) return;
  at += strlen(pattern);
  while (*at == ' ' || *at == '\t' || *at == '\n' || *at == '\r' || *at == ':') at++;
  if (*at != '"') return;
  at++;
  size_t length = strcspn(at, "\"\\");
  if (at[length] != '"' || length >= size) return;
  memcpy(out, at, length);
  out[length] = '\0';
}

static int write_all(int fd, const char *data, size_t length) {
  while (length > 0) {
    ssize_t written = write(fd, data, length);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return -1;
    data += written;
    length -= (size_t)written;
  }
  return 0;
}

/* A CNI error result on stdout; exit code 1 as the specification wants for errors. */
static int fail(const char *version, int code, const char *message, const char *detail) {
  printf("{\"cniVersion\":\"%s\",\"code\":%d,\"msg\":\"envoy-injector-cni: %s\",\"details\":\"%s\"}\n", version[0] ? version : "1.0.0", code, message, detail);
  return 1;
}

/* The agent did not answer: ADD fails (try again later), anything else passes. */
static int unreachable(const char *command, const char *version, const char *detail) {
  if (strcmp(command, "ADD") != 0) return 0;
  return fail(version, 11, "the node agent did not answer: the Pod's capture rules cannot be judged", detail);
}

/*
 * DEL: nothing of ours to undo (the rules live in the Pod's network
 * namespace, which goes with it), so the agent is not asked. The CNI
 * specification wants DEL to succeed when what it would remove is gone, and
 * runtimes call it again and again until it does: whatever it is handed
 * (no configuration, not JSON, too large, an agent down), it reads stdin to
 * its end, prints nothing and exits 0.
 */
static int teardown(void) {
  char discard[65536];
  for (;;) {
    ssize_t got = read(0, discard, sizeof discard);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return 0;
  }
}

int main(void) {
  const char *command = getenv("CNI_COMMAND");
  if (command == NULL) command = "";
  if (strcmp(command, "VERSION") == 0) {
    puts("{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.3.0\",\"0.3.1\",\"0.4.0\",\"1.0.0\",\"1.1.0\"]}");
    return 0;
  }
  if (strcmp(command, "DEL") == 0) return teardown();
  char *config = malloc(MAX_CONFIG + 1);
  if (config == NULL) return fail("", 999, "out of memory", "");
  size_t size = 0;
  for (;;) {
    ssize_t got = read(0, config + size, MAX_CONFIG - size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    size += (size_t)got;
    if (size == MAX_CONFIG) return fail("", 999, "the network configuration is larger than 1 MiB", "");
  }
  config[size] = '\0';
  char version[32], path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  json_string(config, "cniVersion", version, sizeof version);
  json_string(config, "agentSocket", path, sizeof path);
  if (path[0] == '\0') return fail(version, 7, "the configuration has no agentSocket", "");

  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  strncpy(address.sun_path, path, sizeof address.sun_path - 1);
  struct timeval timeout = {.tv_sec = TIMEOUT_SECONDS};
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) != 0 || setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout) != 0 ||
      connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
    return unreachable(command, version, strerror(errno));
  }
  char line[8192];
  for (size_t i = 0; i < sizeof VARIABLES / sizeof VARIABLES[0]; i++) {
    const char *value = getenv(VARIABLES[i]);
    if (value == NULL || strchr(value, '\n') != NULL) continue;
    int length = snprintf(line, sizeof line, "%s=%s\n", VARIABLES[i], value);
    if (length < 0 || (size_t)length >= sizeof line || write_all(fd, line, (size_t)length) != 0) return unreachable(command, version, "cannot send the request");
  }
  if (write_all(fd, "\n", 1) != 0 || write_all(fd, config, size) != 0 || shutdown(fd, SHUT_WR) != 0) return unreachable(command, version, "cannot send the request");

  char *answer = malloc(MAX_ANSWER + 1);
  if (answer == NULL) return fail(version, 999, "out of memory", "");
  size_t length = 0;
  for (;;) {
    ssize_t got = read(fd, answer + length, MAX_ANSWER - length);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return unreachable(command, version, strerror(errno));
    if (got == 0 || length + (size_t)got == MAX_ANSWER) {
      length += got > 0 ? (size_t)got : 0;
      break;
    }
    length += (size_t)got;
  }
  answer[length] = '\0';
  char *newline = memchr(answer, '\n', length);
  char *end = NULL;
  long code = newline == NULL ? -1 : strtol(answer, &end, 10);
  if (newline == NULL || end != newline || code < 0 || code > 255) return unreachable(command, version, "the agent's answer has no exit code");
  size_t body = length - (size_t)(newline + 1 - answer);
  if (write_all(1, newline + 1, body) != 0) return 1;
  return (int)code;
}
