#!/bin/bash
# The image's HEALTHCHECK (/usr/local/bin/tollgate-healthcheck): GET /healthz on the admin
# listener, healthy only on HTTP 200. bash's /dev/tcp, so that the image carries no curl.
#
#   tollgate-healthcheck [PORT]      (default: $TOLLGATE_ADMIN_PORT, else 9090)
set -u
port=${1:-${TOLLGATE_ADMIN_PORT:-9090}}
# Connection refused fails here; a listener that never answers is cut by read's timeout (and
# by the HEALTHCHECK's own --timeout).
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
# HTTP/1.0: the admin listener closes after one answer.
printf 'GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3 || exit 1
read -r -t 3 version status _ <&3 || { echo "healthz: no answer on port $port"; exit 1; }
if [ "$status" != 200 ]; then
  echo "healthz: $version $status"
  exit 1
fi
echo "healthz: 200"
