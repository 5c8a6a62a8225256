"""A fleet of Docker hosts on Ray: host agents own each node's engine, a router places rollouts (docs/fleet.md)."""
