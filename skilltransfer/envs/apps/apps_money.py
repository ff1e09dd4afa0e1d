"""Money apps: payments (balance, transactions, person-to-person transfers and requests) and shopping."""

from __future__ import annotations

import json
from typing import Any

from skilltransfer.envs.apps.api import ApiError, Db, api, check_date, loads, login_api, paginate, register_app

register_app("payments", "Bank/wallet app: balance, categorised transactions, sending and requesting money.")
register_app("shopping", "Online shop: product search, cart, orders (paid with a payment card), returns.")

CATEGORIES = ("groceries", "dining", "transport", "entertainment", "utilities", "health", "clothing", "rent",
              "salary", "transfer")

# ---------------------------------------------------------------- payments
login_api("payments")


def _tx_view(row: dict[str, Any]) -> dict[str, Any]:
    return {"transaction_id": row["id"], "direction": row["direction"], "amount": row["amount"],
            "category": row["category"], "counterparty": row["counterparty"], "description": row["description"],
            "created_at": row["created_at"]}


def _amount(amount: float) -> float:
    if isinstance(amount, bool) or not isinstance(amount, int | float) or amount <= 0:
        raise ApiError(f"amount must be a positive number, got {amount!r}.")
    if round(amount, 2) != amount:
        raise ApiError("amount can have at most 2 decimal places.")
    return float(amount)


@api("payments")
def show_balance(db: Db) -> dict[str, float]:
    """Show the wallet balance.

    Returns:
        {"balance": float}.
    """
    return {"balance": round(db.all("SELECT balance FROM wallet")[0]["balance"], 2)}


@api("payments")
def show_categories(db: Db) -> list[str]:
    """List the transaction categories.

    Returns:
        list of str.
    """
    return list(CATEGORIES)


@api("payments")
def show_transactions(db: Db, start_date: str | None = None, end_date: str | None = None,
                      direction: str | None = None, category: str | None = None, counterparty: str | None = None,
                      page_index: int = 0, page_limit: int = 5) -> list[dict[str, Any]]:
    """List transactions, newest first, filtered by date range, direction, category and counterparty.

    Args:
        start_date: earliest date, YYYY-MM-DD (inclusive).
        end_date: latest date, YYYY-MM-DD (inclusive).
        direction: "in" (money received) or "out" (money spent or sent).
        category: one of show_categories().
        counterparty: exact merchant name or person's email address.
        page_index: 0-based page number.
        page_limit: transactions per page (at most 20).

    Returns:
        list of {"transaction_id", "direction", "amount", "category", "counterparty", "description", "created_at"}.
    """
    check_date(start_date, "start_date")
    check_date(end_date, "end_date")
    if direction not in (None, "in", "out"):
        raise ApiError("direction must be 'in' or 'out'.")
    if category is not None and category not in CATEGORIES:
        raise ApiError(f"Unknown category {category!r}; categories: {', '.join(CATEGORIES)}.")
    rows = [r for r in db.all("SELECT * FROM transactions ORDER BY created_at DESC, id DESC")
            if (start_date is None or r["created_at"][:10] >= start_date[:10])
            and (end_date is None or r["created_at"][:10] <= end_date[:10])
            and (direction is None or r["direction"] == direction)
            and (category is None or r["category"] == category)
            and (counterparty is None or r["counterparty"].lower() == counterparty.lower())]
    return paginate([_tx_view(r) for r in rows], page_index, page_limit)


@api("payments")
def show_transaction(db: Db, transaction_id: int) -> dict[str, Any]:
    """Show one transaction.

    Args:
        transaction_id: the transaction's id.

    Returns:
        {"transaction_id", "direction", "amount", "category", "counterparty", "description", "created_at"}.
    """
    return _tx_view(db.get("transactions", transaction_id, "transaction"))


def _pay(db: Db, email: str, amount: float, description: str) -> int:
    balance = db.all("SELECT balance FROM wallet")[0]["balance"]
    if amount > balance:
        raise ApiError(f"Insufficient balance: {balance:.2f} available, {amount:.2f} needed.")
    db.run("UPDATE wallet SET balance = ? WHERE id = 1", round(balance - amount, 2))
    return db.run("INSERT INTO transactions (direction, amount, category, counterparty, description, created_at) "
                  "VALUES ('out', ?, 'transfer', ?, ?, ?)", amount, email.lower(), description, db.now())


def _email(address: str, name: str) -> str:
    if not isinstance(address, str) or "@" not in address:
        raise ApiError(f"{name} must be an email address, got {address!r}.")
    return address.strip().lower()


@api("payments")
def send_money(db: Db, receiver_email: str, amount: float, description: str = "") -> dict[str, Any]:
    """Send money from the wallet to a person.

    Args:
        receiver_email: the receiver's email address.
        amount: how much, e.g. 25.5 (at most 2 decimals).
        description: a note shown to the receiver.

    Returns:
        {"message": str, "transaction_id": int}.
    """
    tx = _pay(db, _email(receiver_email, "receiver_email"), _amount(amount), str(description))
    return {"message": "Money sent.", "transaction_id": tx}


@api("payments")
def request_money(db: Db, requestee_email: str, amount: float, description: str = "") -> dict[str, Any]:
    """Ask a person to pay you.

    Args:
        requestee_email: the email address of the person who should pay.
        amount: how much (at most 2 decimals).
        description: what it is for.

    Returns:
        {"message": str, "request_id": int}.
    """
    request_id = db.run("INSERT INTO payment_requests (requester, requestee, amount, description, status, created_at)"
                        " VALUES (?, ?, ?, ?, 'pending', ?)", db.user()["email"],
                        _email(requestee_email, "requestee_email"), _amount(amount), str(description), db.now())
    return {"message": "Payment request sent.", "request_id": request_id}


def _request_view(row: dict[str, Any]) -> dict[str, Any]:
    return {"request_id": row["id"], "requester": row["requester"], "requestee": row["requestee"],
            "amount": row["amount"], "description": row["description"], "status": row["status"],
            "created_at": row["created_at"]}


@api("payments")
def show_payment_requests(db: Db, incoming: bool = True, status: str | None = None, page_index: int = 0,
                          page_limit: int = 5) -> list[dict[str, Any]]:
    """List payment requests others sent you (incoming) or you sent (incoming=False), newest first.

    Args:
        incoming: True for requests addressed to you, False for your own requests.
        status: "pending", "approved" or "declined".
        page_index: 0-based page number.
        page_limit: requests per page (at most 20).

    Returns:
        list of {"request_id", "requester", "requestee", "amount", "description", "status", "created_at"}.
    """
    if status not in (None, "pending", "approved", "declined"):
        raise ApiError("status must be 'pending', 'approved' or 'declined'.")
    me = db.user()["email"]
    column = "requestee" if incoming else "requester"
    rows = [r for r in db.all(f"SELECT * FROM payment_requests WHERE {column} = ? ORDER BY created_at DESC, id DESC",
                              me) if status is None or r["status"] == status]
    return paginate([_request_view(r) for r in rows], page_index, page_limit)


def _incoming_pending(db: Db, request_id: int) -> dict[str, Any]:
    row = db.get("payment_requests", request_id, "payment request")
    if row["requestee"] != db.user()["email"]:
        raise ApiError(f"Payment request {request_id} was not sent to you.")
    if row["status"] != "pending":
        raise ApiError(f"Payment request {request_id} is already {row['status']}.")
    return row


@api("payments")
def approve_payment_request(db: Db, request_id: int) -> dict[str, Any]:
    """Pay a pending payment request addressed to you.

    Args:
        request_id: the request's id.

    Returns:
        {"message": str, "transaction_id": int}.
    """
    row = _incoming_pending(db, request_id)
    tx = _pay(db, row["requester"], row["amount"], row["description"])
    db.run("UPDATE payment_requests SET status = 'approved' WHERE id = ?", request_id)
    return {"message": f"Request {request_id} paid.", "transaction_id": tx}


@api("payments")
def decline_payment_request(db: Db, request_id: int) -> dict[str, str]:
    """Decline a pending payment request addressed to you.

    Args:
        request_id: the request's id.

    Returns:
        {"message": str}.
    """
    _incoming_pending(db, request_id)
    db.run("UPDATE payment_requests SET status = 'declined' WHERE id = ?", request_id)
    return {"message": f"Request {request_id} declined."}


# ---------------------------------------------------------------- shopping
login_api("shopping")


def _product_view(row: dict[str, Any]) -> dict[str, Any]:
    return {"product_id": row["id"], "name": row["name"], "category": row["category"], "price": row["price"],
            "rating": row["rating"], "in_stock": row["stock"]}


@api("shopping")
def search_products(db: Db, query: str = "", category: str | None = None, min_rating: float | None = None,
                    max_price: float | None = None, sort_by: str = "name", page_index: int = 0,
                    page_limit: int = 5) -> list[dict[str, Any]]:
    """Search the catalogue.

    Args:
        query: case-insensitive text to find in the product name ("" matches all).
        category: a category from show_product_categories().
        min_rating: only products rated at least this (0-5).
        max_price: only products costing at most this.
        sort_by: "name", "price" (cheapest first) or "rating" (best first).
        page_index: 0-based page number.
        page_limit: products per page (at most 20).

    Returns:
        list of {"product_id", "name", "category", "price", "rating", "in_stock"}.
    """
    orders = {"name": "name, id", "price": "price, id", "rating": "rating DESC, id"}
    if sort_by not in orders:
        raise ApiError("sort_by must be 'name', 'price' or 'rating'.")
    rows = [r for r in db.all(f"SELECT * FROM products ORDER BY {orders[sort_by]}")
            if query.lower() in r["name"].lower() and (category is None or r["category"] == category)
            and (min_rating is None or r["rating"] >= min_rating) and (max_price is None or r["price"] <= max_price)]
    return paginate([_product_view(r) for r in rows], page_index, page_limit)


@api("shopping")
def show_product_categories(db: Db) -> list[str]:
    """List the product categories.

    Returns:
        list of str.
    """
    return [r["category"] for r in db.all("SELECT DISTINCT category FROM products ORDER BY category")]


@api("shopping")
def show_product(db: Db, product_id: int) -> dict[str, Any]:
    """Show one product.

    Args:
        product_id: the product's id.

    Returns:
        {"product_id", "name", "category", "price", "rating", "in_stock"}.
    """
    return _product_view(db.get("products", product_id, "product"))


@api("shopping")
def add_to_cart(db: Db, product_id: int, quantity: int = 1) -> dict[str, str]:
    """Put a product into the cart (adds to the quantity already there).

    Args:
        product_id: the product's id.
        quantity: how many (>= 1).

    Returns:
        {"message": str}.
    """
    product = db.get("products", product_id, "product")
    if not isinstance(quantity, int) or quantity < 1:
        raise ApiError("quantity must be an integer >= 1.")
    current = db.one("SELECT quantity FROM cart WHERE product_id = ?", product_id)
    total = quantity + (current["quantity"] if current else 0)
    if total > product["stock"]:
        raise ApiError(f"Only {product['stock']} of product {product_id} in stock.")
    db.run("INSERT OR REPLACE INTO cart (product_id, quantity) VALUES (?, ?)", product_id, total)
    return {"message": f"Cart now has {total} x {product['name']}."}


@api("shopping")
def show_cart(db: Db) -> dict[str, Any]:
    """Show the cart.

    Returns:
        {"items": list of {"product_id", "name", "quantity", "price"}, "total": float}.
    """
    items = [{"product_id": r["product_id"], "name": r["name"], "quantity": r["quantity"], "price": r["price"]}
             for r in db.all("SELECT cart.product_id, cart.quantity, products.name, products.price FROM cart JOIN "
                             "products ON products.id = cart.product_id ORDER BY cart.product_id")]
    return {"items": items, "total": round(sum(i["price"] * i["quantity"] for i in items), 2)}


@api("shopping")
def remove_from_cart(db: Db, product_id: int) -> dict[str, str]:
    """Remove a product from the cart.

    Args:
        product_id: the product's id.

    Returns:
        {"message": str}.
    """
    if db.one("SELECT product_id FROM cart WHERE product_id = ?", product_id) is None:
        raise ApiError(f"Product {product_id} is not in the cart.")
    db.run("DELETE FROM cart WHERE product_id = ?", product_id)
    return {"message": f"Removed product {product_id} from the cart."}


@api("shopping")
def place_order(db: Db, payment_card_id: int) -> dict[str, Any]:
    """Buy everything in the cart with a payment card (see supervisor.show_payment_cards); empties the cart.

    Args:
        payment_card_id: the card to pay with.

    Returns:
        {"message": str, "order_id": int, "total": float}.
    """
    if db.one("SELECT id FROM payment_cards WHERE id = ?", payment_card_id) is None:
        raise ApiError(f"No payment card with id {payment_card_id}.")
    cart = show_cart(db)
    if not cart["items"]:
        raise ApiError("The cart is empty.")
    for item in cart["items"]:
        db.run("UPDATE products SET stock = stock - ? WHERE id = ?", item["quantity"], item["product_id"])
    order_id = db.run("INSERT INTO orders (items, total, status, payment_card_id, created_at) VALUES "
                      "(?, ?, 'placed', ?, ?)", json.dumps(cart["items"]), cart["total"], payment_card_id, db.now())
    db.run("DELETE FROM cart")
    return {"message": "Order placed.", "order_id": order_id, "total": cart["total"]}


def _order_view(row: dict[str, Any]) -> dict[str, Any]:
    return {"order_id": row["id"], "items": loads(row["items"]), "total": row["total"], "status": row["status"],
            "payment_card_id": row["payment_card_id"], "created_at": row["created_at"]}


@api("shopping")
def show_orders(db: Db, page_index: int = 0, page_limit: int = 5) -> list[dict[str, Any]]:
    """List your orders, newest first.

    Args:
        page_index: 0-based page number.
        page_limit: orders per page (at most 20).

    Returns:
        list of {"order_id", "items", "total", "status", "payment_card_id", "created_at"}.
    """
    rows = db.all("SELECT * FROM orders ORDER BY created_at DESC, id DESC")
    return paginate([_order_view(r) for r in rows], page_index, page_limit)


@api("shopping")
def show_order(db: Db, order_id: int) -> dict[str, Any]:
    """Show one order.

    Args:
        order_id: the order's id.

    Returns:
        {"order_id", "items", "total", "status", "payment_card_id", "created_at"}.
    """
    return _order_view(db.get("orders", order_id, "order"))


@api("shopping")
def return_order(db: Db, order_id: int) -> dict[str, str]:
    """Return a delivered order (its items go back into stock).

    Args:
        order_id: the order's id.

    Returns:
        {"message": str}.
    """
    row = db.get("orders", order_id, "order")
    if row["status"] != "delivered":
        raise ApiError(f"Only delivered orders can be returned; order {order_id} is {row['status']}.")
    for item in loads(row["items"]):
        db.run("UPDATE products SET stock = stock + ? WHERE id = ?", item["quantity"], item["product_id"])
    db.run("UPDATE orders SET status = 'returned' WHERE id = ?", order_id)
    return {"message": f"Order {order_id} returned."}
