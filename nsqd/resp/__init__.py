"""The place for the Redis (RESP) front-end: a listener on --resp-address whose connections call
the same broker API as tcp/ and http/ and consume as their own engine.ports.Consumer. Empty
until that front-end lands; the import contracts already hold it to the front-end rules."""
