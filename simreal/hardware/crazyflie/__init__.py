"""The Crazyflie 2.x over CRTP (cflib): driver and twin."""
