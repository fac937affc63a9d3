# Shared by bench/run.sh and bench/syscalls.sh (sourced, not run): the packages the benchmark needs, the
# nginx + nchan peer's configuration, and small helpers. The caller sets ROOT (the repository) and log().

install_packages() {
	local missing="" p
	[ -x "$ROOT/scripts/install-deps.sh" ] && "$ROOT/scripts/install-deps.sh"
	for p in nginx libnginx-mod-nchan wrk curl procps cmake pkg-config libjansson-dev libssl-dev python3 openssl \
		postgresql redis-server; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing packages:$missing — run: sudo apt-get install -y$missing" >&2
		exit 1
	fi
	log "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q --no-install-recommends $missing >/dev/null ||
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $missing >/dev/null; }
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_http() { # url
	local i
	for i in $(seq 1 100); do
		curl -k -s -o /dev/null -m 1 "$1" && return 0
		sleep 0.1
	done
	echo "nothing answers at $1" >&2
	exit 1
}

# nginx with nchan, the same shape as relayd: one event loop (one worker), no request log; /me.json is the
# REST comparison's static file, /pub/<i> and /sub/<i> (EventSource) the streaming comparison's channels.
nginx_conf() { # folder port nofile: writes folder/nginx.conf (and its www/ and tmp/ folders)
	local dir=$1 port=$2 nofile=$3 module
	module=$(ls /usr/lib/nginx/modules/ngx_nchan_module.so 2>/dev/null || true)
	[ -n "$module" ] || { echo "the nchan module is not installed" >&2; exit 1; }
	mkdir -p "$dir/www" "$dir/tmp"
	cat >"$dir/nginx.conf" <<CONF
load_module $module;
worker_processes 1;
daemon off;
master_process on;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
worker_rlimit_nofile $nofile;
user root root;
events { worker_connections 30000; use epoll; }
http {
  access_log off;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  keepalive_requests 100000000;
  keepalive_timeout 600s;
  default_type application/json;
  server {
    listen 127.0.0.1:$port backlog=4096;
    location = /me.json { root $dir/www; }
    location ~ ^/pub/(\w+)$ { nchan_publisher; nchan_channel_id \$1; }
    location ~ ^/sub/(\w+)$ {
      nchan_subscriber eventsource;
      nchan_channel_id \$1;
      nchan_subscriber_first_message newest;
    }
  }
}
CONF
}
