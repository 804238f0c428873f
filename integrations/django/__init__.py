"""Django integrations of the RocketMQ SDK."""
