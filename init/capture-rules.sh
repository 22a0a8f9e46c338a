#!/bin/sh
# envoy-init: sends a Pod's TCP traffic through the injected Envoy (docs/design.md §11).
# The envoy-init image runs this script, and test/capture-rules.test.ts runs this very
# file in network namespaces of its own. POSIX sh: Debian's dash runs it.
#
#   capture-rules.sh --proxy-uid=1337 --outbound-port=15001 --inbound-port=15006 \
#     --proxy-ports=9901,9902 [--exclude-outbound-cidrs=LIST] [--exclude-outbound-ports=LIST] \
#     [--exclude-inbound-ports=LIST] [--include-inbound-ports=LIST] [--backend=auto|nft|legacy] \
#     [--interception=redirect|tproxy]
#
# LISTs are comma-separated; empty means none (include: every port). Rules, in the nat table:
#   OUTPUT -p tcp -> ENVOY_OUTBOUND: the proxy's own user, loopback, the excluded CIDRs
#     and ports, and the proxy's ports return; every other TCP connection goes to the
#     outbound port. UDP (DNS) is never touched.
#   PREROUTING -p tcp -> ENVOY_INBOUND: the proxy's ports and the excluded ports return;
#     the included ports (or all) go to the inbound port.
# With --interception=tproxy (issue 41) inbound goes to the inbound port by the TPROXY
# target instead, keeping the client's address (the proxy's listener is transparent):
#   mangle PREROUTING -p tcp -> ENVOY_INBOUND: loopback, the proxy's ports and the excluded
#     ports return; a packet of a transparent socket of the proxy's is marked and accepted
#     (ENVOY_DIVERT), one of another known connection returns; the included ports (or all)
#     get TPROXY to the inbound port, marked;
#     a packet the proxy's marked connection sends (the proxy connecting to the app from
#     the client's address, as Envoy's original_src does) saves the mark in its connection;
#   mangle OUTPUT -p tcp: the app's replies on such a connection get the mark back;
#   ip rule fwmark MARK lookup TABLE, and TABLE's local default route on lo: marked
#     packets are delivered in the Pod, to the proxy's transparent sockets.
#   The nat ENVOY_INBOUND chain is then empty. Outbound is the same in both modes, except
#   that the proxy's group (the proxy uid's number) returns too: TPROXY's proxy runs as root.
# The same for IPv6 with ip6tables. A rerun (a restarted init container) flushes and
# rebuilds the chains and adds each jump, rule and route once: never a second copy.
set -eu

OUTBOUND_CHAIN=ENVOY_OUTBOUND
INBOUND_CHAIN=ENVOY_INBOUND
DIVERT_CHAIN=ENVOY_DIVERT
# TPROXY's mark and routing table (Istio's numbers: the proxy's uid, and 133).
TPROXY_MARK=0x539
TPROXY_TABLE=133

fail() {
  echo "envoy-init: $*" >&2
  exit 2
}

proxy_uid='' outbound_port='' inbound_port='' proxy_ports=''
exclude_outbound_cidrs='' exclude_outbound_ports='' exclude_inbound_ports='' include_inbound_ports=''
backend=auto interception=redirect
for argument in "$@"; do
  case "$argument" in
    --proxy-uid=*) proxy_uid=${argument#*=} ;;
    --outbound-port=*) outbound_port=${argument#*=} ;;
    --inbound-port=*) inbound_port=${argument#*=} ;;
    --proxy-ports=*) proxy_ports=${argument#*=} ;;
    --exclude-outbound-cidrs=*) exclude_outbound_cidrs=${argument#*=} ;;
    --exclude-outbound-ports=*) exclude_outbound_ports=${argument#*=} ;;
    --exclude-inbound-ports=*) exclude_inbound_ports=${argument#*=} ;;
    --include-inbound-ports=*) include_inbound_ports=${argument#*=} ;;
    --backend=*) backend=${argument#*=} ;;
    --interception=*) interception=${argument#*=} ;;
    *) fail "unknown argument \"$argument\" (see the comment at the top of $0)" ;;
  esac
done

# ---- validation: all of it before any rule changes -------------------------

is_port() {
  case "$1" in '' | *[!0-9]* | 0*) return 1 ;; esac
  [ "${#1}" -le 5 ] && [ "$1" -le 65535 ]
}
check_port() { is_port "$2" || fail "$1: \"$2\" is not a port (1-65535)"; }
check_ports() {
  name=$1
  list=$2
  [ -z "$list" ] && return 0
  old_ifs=$IFS
  IFS=,
  for port in $list; do check_port "$name" "$port"; done
  IFS=$old_ifs
}
# Shape only: iptables itself refuses a CIDR whose numbers are out of range, before any change.
check_cidrs() {
  [ -z "$1" ] && return 0
  old_ifs=$IFS
  IFS=,
  for cidr in $1; do
    case "$cidr" in
      */*) ;;
      *) fail "--exclude-outbound-cidrs: \"$cidr\" is not a CIDR (address/prefix)" ;;
    esac
    case "${cidr%/*}" in
      *[!0-9a-fA-F:.]* | '') fail "--exclude-outbound-cidrs: \"$cidr\" is not a CIDR (address/prefix)" ;;
    esac
    case "${cidr#*/}" in
      '' | *[!0-9]*) fail "--exclude-outbound-cidrs: \"$cidr\" is not a CIDR (address/prefix)" ;;
    esac
  done
  IFS=$old_ifs
}

case "$proxy_uid" in '' | *[!0-9]*) fail "--proxy-uid: \"$proxy_uid\" is not a user id" ;; esac
check_port --outbound-port "$outbound_port"
check_port --inbound-port "$inbound_port"
check_ports --proxy-ports "$proxy_ports"
check_ports --exclude-outbound-ports "$exclude_outbound_ports"
check_ports --exclude-inbound-ports "$exclude_inbound_ports"
check_ports --include-inbound-ports "$include_inbound_ports"
check_cidrs "$exclude_outbound_cidrs"
case "$interception" in redirect | tproxy) ;; *) fail "--interception: \"$interception\" is not redirect or tproxy" ;; esac

# ---- backend: nft where the kernel has it, legacy otherwise ----------------

case "$backend" in
  auto)
    if iptables-nft -t nat -S >/dev/null 2>&1; then backend=nft; else backend=legacy; fi
    ;;
  nft | legacy) ;;
  *) fail "--backend: \"$backend\" is not auto, nft or legacy" ;;
esac

# ---- the rules ---------------------------------------------------------------

# Runs one iptables command, saying which on failure (the init container's log is all a user sees).
run() {
  if ! "$@"; then fail "failed: $*"; fi
}

# A chain of our own, empty: created, or flushed when a previous run left it ($4: the table, nat by default).
fresh_chain() {
  "$1" -w -t "${3:-nat}" -N "$2" 2>/dev/null || run "$1" -w -t "${3:-nat}" -F "$2"
}

# A rule added only when it is not there yet: $1 the binary, $2 the table, $3 the chain, then the rule.
add_once() {
  binary=$1 table=$2 chain=$3
  shift 3
  "$binary" -w -t "$table" -C "$chain" "$@" 2>/dev/null || run "$binary" -w -t "$table" -A "$chain" "$@"
}

# The jump from a built-in chain, added only when it is not there yet.
jump_once() {
  add_once "$1" nat "$2" -p tcp -j "$3"
}

each() {
  [ -z "$2" ] && return 0
  old_ifs=$IFS
  IFS=,
  set -f
  for item in $2; do
    IFS=$old_ifs
    "$1" "$item"
    IFS=,
  done
  set +f
  IFS=$old_ifs
}

# Installs the rules of one family: $1 is iptables or ip6tables of the backend, $2 its loopback range.
install_family() {
  ipt=$1
  loopback=$2
  family=$3
  fresh_chain "$ipt" "$OUTBOUND_CHAIN"
  fresh_chain "$ipt" "$INBOUND_CHAIN"

  # Outbound. The proxy's own connections (to the original destinations) go straight: no loop.
  run "$ipt" -w -t nat -A "$OUTBOUND_CHAIN" -m owner --uid-owner "$proxy_uid" -j RETURN
  # TPROXY's proxy runs as root (its NET_ADMIN would not survive exec as another user), in the proxy's uid as its group.
  [ "$interception" = tproxy ] && run "$ipt" -w -t nat -A "$OUTBOUND_CHAIN" -m owner --gid-owner "$proxy_uid" -j RETURN
  run "$ipt" -w -t nat -A "$OUTBOUND_CHAIN" -o lo -j RETURN
  run "$ipt" -w -t nat -A "$OUTBOUND_CHAIN" -d "$loopback" -j RETURN
  outbound_cidr() {
    case "$1" in
      *:*) [ "$family" = 6 ] || return 0 ;;
      *) [ "$family" = 4 ] || return 0 ;;
    esac
    run "$ipt" -w -t nat -A "$OUTBOUND_CHAIN" -d "$1" -j RETURN
  }
  each outbound_cidr "$exclude_outbound_cidrs"
  outbound_port_excluded() { run "$ipt" -w -t nat -A "$OUTBOUND_CHAIN" -p tcp --dport "$1" -j RETURN; }
  # The proxy's ports too: Envoy would hand such a connection to its own listener of that port.
  each outbound_port_excluded "$proxy_ports"
  each outbound_port_excluded "$exclude_outbound_ports"
  run "$ipt" -w -t nat -A "$OUTBOUND_CHAIN" -p tcp -j REDIRECT --to-ports "$outbound_port"

  jump_once "$ipt" OUTPUT "$OUTBOUND_CHAIN"
  jump_once "$ipt" PREROUTING "$INBOUND_CHAIN"
  if [ "$interception" = tproxy ]; then
    install_tproxy "$ipt" "$family"
    return 0
  fi

  # Inbound. The proxy's ports (its health probe) are never redirected.
  inbound_port_excluded() { run "$ipt" -w -t nat -A "$INBOUND_CHAIN" -p tcp --dport "$1" -j RETURN; }
  each inbound_port_excluded "$proxy_ports"
  each inbound_port_excluded "$exclude_inbound_ports"
  if [ -n "$include_inbound_ports" ]; then
    inbound_port_included() { run "$ipt" -w -t nat -A "$INBOUND_CHAIN" -p tcp --dport "$1" -j REDIRECT --to-ports "$inbound_port"; }
    each inbound_port_included "$include_inbound_ports"
  else
    run "$ipt" -w -t nat -A "$INBOUND_CHAIN" -p tcp -j REDIRECT --to-ports "$inbound_port"
  fi
}

# Inbound by TPROXY (the nat inbound chain stays empty): the mangle chains, the mark's routing.
install_tproxy() {
  ipt=$1
  family=$2
  fresh_chain "$ipt" "$INBOUND_CHAIN" mangle
  fresh_chain "$ipt" "$DIVERT_CHAIN" mangle
  run "$ipt" -w -t mangle -A "$DIVERT_CHAIN" -j MARK --set-mark "$TPROXY_MARK"
  run "$ipt" -w -t mangle -A "$DIVERT_CHAIN" -j ACCEPT
  # The proxy's connection to the app, from the client's address and marked (original_src): the mark kept for the replies.
  run "$ipt" -w -t mangle -A "$INBOUND_CHAIN" -p tcp -i lo -m mark --mark "$TPROXY_MARK" -j CONNMARK --save-mark
  run "$ipt" -w -t mangle -A "$INBOUND_CHAIN" -i lo -j RETURN
  tproxy_port_excluded() { run "$ipt" -w -t mangle -A "$INBOUND_CHAIN" -p tcp --dport "$1" -j RETURN; }
  each tproxy_port_excluded "$proxy_ports"
  each tproxy_port_excluded "$exclude_inbound_ports"
  # A packet of a connection the proxy's transparent listener holds already: delivered to it.
  run "$ipt" -w -t mangle -A "$INBOUND_CHAIN" -p tcp -m socket --transparent -j "$DIVERT_CHAIN"
  # Any other packet of a known connection (the replies to the Pod's own connections out) goes as it would.
  run "$ipt" -w -t mangle -A "$INBOUND_CHAIN" -p tcp -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN
  if [ -n "$include_inbound_ports" ]; then
    tproxy_port_included() { run "$ipt" -w -t mangle -A "$INBOUND_CHAIN" -p tcp --dport "$1" -j TPROXY --on-port "$inbound_port" --tproxy-mark "$TPROXY_MARK/0xffffffff"; }
    each tproxy_port_included "$include_inbound_ports"
  else
    run "$ipt" -w -t mangle -A "$INBOUND_CHAIN" -p tcp -j TPROXY --on-port "$inbound_port" --tproxy-mark "$TPROXY_MARK/0xffffffff"
  fi
  add_once "$ipt" mangle PREROUTING -p tcp -j "$INBOUND_CHAIN"
  # The app's replies to the client's address, on the proxy's marked connection: the mark back, so they stay in the Pod.
  add_once "$ipt" mangle OUTPUT -p tcp -m connmark --mark "$TPROXY_MARK" -j CONNMARK --restore-mark
  ip -"$family" rule show | grep -q "fwmark $TPROXY_MARK lookup $TPROXY_TABLE" || run ip -"$family" rule add fwmark "$TPROXY_MARK" lookup "$TPROXY_TABLE"
  if [ "$family" = 4 ]; then local_default=0.0.0.0/0; else local_default=::/0; fi
  run ip -"$family" route replace local "$local_default" dev lo table "$TPROXY_TABLE"
}

install_family "iptables-$backend" 127.0.0.0/8 4
# A dual-stack Pod must not leave IPv6 open; a kernel without IPv6 has nothing to capture.
if [ -e /proc/net/if_inet6 ]; then
  install_family "ip6tables-$backend" ::1/128 6
else
  echo "envoy-init: IPv6 is disabled in this kernel; IPv4 rules only"
fi
echo "envoy-init: TCP captured with iptables-$backend: outbound to port $outbound_port (proxy uid $proxy_uid), inbound to port $inbound_port$([ "$interception" = tproxy ] && echo ' by TPROXY')"
