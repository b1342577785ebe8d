#!/bin/bash
# The official zookeeper image's entrypoint contract, for Debian's package: write zoo.cfg from the
# ZOO_* variables unless one is mounted, write myid, then run the command.
set -euo pipefail
CFG="$ZOO_CONF_DIR/zoo.cfg"
if [ ! -f "$CFG" ]; then
  {
    echo "dataDir=$ZOO_DATA_DIR"
    echo "dataLogDir=$ZOO_DATA_LOG_DIR"
    echo "tickTime=${ZOO_TICK_TIME:-2000}"
    echo "initLimit=${ZOO_INIT_LIMIT:-5}"
    echo "syncLimit=${ZOO_SYNC_LIMIT:-2}"
    echo "autopurge.snapRetainCount=${ZOO_AUTOPURGE_SNAPRETAINCOUNT:-3}"
    echo "autopurge.purgeInterval=${ZOO_AUTOPURGE_PURGEINTERVAL:-0}"
    echo "maxClientCnxns=${ZOO_MAX_CLIENT_CNXNS:-60}"
    echo "standaloneEnabled=${ZOO_STANDALONE_ENABLED:-true}"
    echo "admin.enableServer=${ZOO_ADMINSERVER_ENABLED:-true}"
    echo "4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr}"
    if [ -z "${ZOO_SERVERS:-}" ]; then
      echo "server.1=localhost:2888:3888;2181"
    else
      for server in $ZOO_SERVERS; do echo "$server"; done
    fi
  } > "$CFG"
  echo "zookeeper.root.logger=INFO, CONSOLE" > "$ZOO_CONF_DIR/log4j.properties"
fi
if [ ! -f "$ZOO_DATA_DIR/myid" ]; then
  echo "${ZOO_MY_ID:-1}" > "$ZOO_DATA_DIR/myid"
fi
exec "$@"
