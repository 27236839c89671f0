"""What keeps a reservation going past its first purchase: extending it, rolling it over to a successor,
keeping looking for an offering, the chains of reservations and their purchase attempts. No module here
imports a door."""
