// Gateway processes sharing one Redis (written next).
