# Sourced by the setup benchmarks: serves CHECKPOINT_DIR as the repository
# bench/model in the Hub's paths from nginx (Debian's nginx-light), static
# files laid out by tests/hub/hub_server.py --write-static, so that the server
# is not what is measured. Sets HUB_URL; stops nginx on exit. NGINX_LIMIT_RATE,
# if set (nginx's limit_rate: bytes per second per connection, e.g. 25m),
# stands for a network slower than loopback.
# Usage: start_nginx_hub SRC_DIR CHECKPOINT_DIR WORKDIR
start_nginx_hub() {
  local src=$1 ck=$2 w=$3
  rm -rf "$w/static" && python3 "$src/tests/hub/hub_server.py" --root "$ck" --repo bench/model --write-static "$w/static"
  local port=$((20000 + RANDOM % 20000))
  cat > "$w/nginx.conf" <<CONF
worker_processes 2;
pid $w/nginx.pid;
error_log $w/nginx.err;
events { worker_connections 256; }
http {
  access_log off;
  sendfile on;
  limit_rate ${NGINX_LIMIT_RATE:-0};
  default_type application/octet-stream;
  client_body_temp_path $w/tmp; proxy_temp_path $w/tmp; fastcgi_temp_path $w/tmp; uwsgi_temp_path $w/tmp; scgi_temp_path $w/tmp;
  server { listen 127.0.0.1:$port; root $w/static; disable_symlinks off; }
}
CONF
  mkdir -p "$w/tmp"
  nginx -c "$w/nginx.conf"
  NGINX_PID_FILE="$w/nginx.pid"
  trap 'kill "$(cat "$NGINX_PID_FILE")" 2> /dev/null || true' EXIT
  HUB_URL="http://127.0.0.1:$port"
}

# The setup benchmarks' common start: WORKDIR made and made absolute (W),
# nginx serving CHECKPOINT_DIR (HUB_URL), the checkpoint's size in bytes
# (CK_BYTES), and drop (sync, then drop the page cache; needs root).
# Usage: start_setup_bench SRC_DIR CHECKPOINT_DIR WORKDIR
start_setup_bench() {
  mkdir -p "$3"
  W=$(realpath "$3")
  start_nginx_hub "$1" "$2" "$W"
  CK_BYTES=$(du -sbL "$2" | cut -f1)
}
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
