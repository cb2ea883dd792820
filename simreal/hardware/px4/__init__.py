"""PX4 autopilots over MAVLink and over ROS 2 (uXRCE-DDS): drivers, twins, the shared autopilot logic."""
